package main

// `netfwd route get [--config FILE] [-j] [ADDR...]` and
// `netfwd route show [--config FILE] [table local|main|all] [-j]`: the FIB
// loaded from a config file, queried as `ip route get|show` would be.
// route get answers from stdin when no address is given: one line out per
// line in, flushed whenever the input has nothing more buffered, so it works
// both interactively and for millions of piped addresses. Every address is
// answered; the exit status is ip's for the worst answer: 2 when a lookup
// failed (no route, or a blackhole, unreachable or prohibit route: the
// kernel refuses those), else 1 when an address did not parse. The config file
// is read and applied by the daemon's reader and applier
// (apply.LoadFIBFile), the table argument of route show is read as the rest
// of a `route show` line (iproute2's abbreviations: `t all`), and answers
// are printed by internal/show, as the control socket prints them.

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/apply"
	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/internal/show"
)

func init() {
	register(command{
		name:  "route",
		usage: "get [--config FILE] [--fib compiled|trie] [-j] [ADDR...] | show [--config FILE] [table local|main|all] [-j]",
		run:   runRoute,
	})
}

func runRoute(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: netfwd route get|show ...")
		return 2
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("route "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgFile := fs.String("config", "", "config file (ip -batch syntax) to load first")
	asJSON := fs.Bool("j", false, "JSON output")
	trie := fs.String("trie", "fast", "bart kind of the merged trie: fast or table")
	fibKind := fs.String("fib", "compiled", "lookup structure: compiled (DIR-24-8 following the trie) or trie")
	words, ok := parseInterspersed(fs, args)
	if !ok {
		return 2
	}
	opts := fib.Options{}
	switch *trie {
	case "fast":
	case "table":
		opts.Trie = fib.TrieTable
	default:
		fmt.Fprintf(stderr, "netfwd route: --trie must be fast or table\n")
		return 2
	}
	switch *fibKind {
	case "compiled":
		opts.Compiled = true
	case "trie":
	default:
		fmt.Fprintf(stderr, "netfwd route: --fib must be compiled or trie\n")
		return 2
	}
	f := fib.New(opts)
	if *cfgFile != "" {
		if err := apply.LoadFIBFile(f, *cfgFile); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
	}
	switch sub {
	case "get":
		return routeGet(f, words, *asJSON, stdin, stdout, stderr)
	case "show", "list":
		return routeShow(f, words, *asJSON, stdout, stderr)
	}
	fmt.Fprintf(stderr, "netfwd route: unknown command %q (want get or show)\n", sub)
	return 2
}

func routeGet(f *fib.FIB, addrs []string, asJSON bool, stdin io.Reader, stdout, stderr io.Writer) int {
	w := bufio.NewWriterSize(stdout, 64*1024)
	defer w.Flush()
	var buf []byte
	status := 0 // the worst of the answers: 2 when a lookup failed, 1 for an invalid address
	answer := func(s string) {
		var st int
		buf, st = show.RouteGet(buf[:0], f, strings.TrimSpace(s), asJSON)
		status = max(status, st)
		w.Write(buf)
	}
	if len(addrs) > 0 {
		for _, a := range addrs {
			answer(a)
		}
		return status
	}
	in := bufio.NewReaderSize(stdin, 64*1024)
	for {
		line, err := in.ReadString('\n')
		if s := strings.TrimSpace(line); s != "" {
			answer(s)
		}
		if err != nil {
			if err != io.EOF {
				fmt.Fprintln(stderr, "netfwd route get:", err)
				return 1
			}
			return status
		}
		if in.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return 1 // reader went away
			}
		}
	}
}

// routeShow answers `route show [table T]`: the arguments are read as the
// rest of a `route show` line, by the same reader as config lines.
func routeShow(f *fib.FIB, words []string, asJSON bool, stdout, stderr io.Writer) int {
	line := "route show " + strings.Join(words, " ")
	cmd, _, err := config.ParseLine(config.Pos{File: "route show", Line: 1}, line)
	q, ok := cmd.Query.(config.RouteShow)
	if err != nil || !ok {
		if err == nil {
			err = fmt.Errorf("not a route show query: %s", config.Quote(line))
		}
		fmt.Fprintf(stderr, "netfwd route show: %v\n", err)
		return 2
	}
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	if err := show.Routes(w, f, q.Table, asJSON || cmd.JSON); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}
