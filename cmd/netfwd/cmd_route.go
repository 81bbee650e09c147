package main

// `netfwd route get [--config FILE] [-j] [ADDR...]` and
// `netfwd route show [--config FILE] [table local|main|all] [-j]`: the FIB
// loaded from a config file, queried as `ip route get|show` would be.
// route get answers from stdin when no address is given: one line out per
// line in, flushed whenever the input has nothing more buffered, so it works
// both interactively and for millions of piped addresses.

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/internal/ctlsock"
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
		if err := config.LoadFIBFile(f, *cfgFile); err != nil {
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
	answer := func(s string) {
		buf = ctlsock.AppendRouteGet(buf[:0], f, strings.TrimSpace(s), asJSON)
		w.Write(buf)
	}
	if len(addrs) > 0 {
		for _, a := range addrs {
			answer(a)
		}
		return 0
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
			return 0
		}
		if in.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return 1 // reader went away
			}
		}
	}
}

func routeShow(f *fib.FIB, words []string, asJSON bool, stdout, stderr io.Writer) int {
	table := fib.TableMain
	for len(words) > 0 {
		if words[0] != "table" || len(words) < 2 {
			fmt.Fprintf(stderr, "netfwd route show: unexpected %q (want: table local|main|all|N)\n", words[0])
			return 2
		}
		if words[1] == "all" {
			table = fib.TableAll
		} else if t, ok := fib.ParseTable(words[1]); ok {
			table = t
		} else {
			fmt.Fprintf(stderr, "netfwd route show: invalid table %q\n", words[1])
			return 2
		}
		words = words[2:]
	}
	routes := f.Routes(table)
	withTable := table == fib.TableAll
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	if asJSON {
		out := make([]fib.JSONRoute, len(routes))
		for i, r := range routes {
			out[i] = r.JSON(withTable)
		}
		b, err := json.Marshal(out)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		w.Write(b)
		w.WriteByte('\n')
		return 0
	}
	for _, r := range routes {
		fmt.Fprintln(w, r.Format(withTable))
	}
	return 0
}
