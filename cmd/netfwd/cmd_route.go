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
	"net/netip"
	"strconv"
	"strings"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/config"
)

func init() {
	register(command{
		name:  "route",
		usage: "get [--config FILE] [-j] [ADDR...] | show [--config FILE] [table local|main|all] [-j]",
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
	// Flags may come after positional words (ip style): parse in rounds.
	var words []string
	for {
		if err := fs.Parse(args); err != nil {
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		words = append(words, fs.Arg(0))
		args = fs.Args()[1:]
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
		buf = appendRouteGet(buf[:0], f, strings.TrimSpace(s), asJSON)
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

// appendRouteGet formats one answer: the design notes' JSON object, or an
// `ip route get` style line.
func appendRouteGet(b []byte, f *fib.FIB, s string, asJSON bool) []byte {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		if asJSON {
			b = append(b, `{"dst":`...)
			b = strconv.AppendQuote(b, s)
			return append(b, `,"error":"invalid IPv4 address"}`+"\n"...)
		}
		return append(b, fmt.Sprintf("%s: invalid IPv4 address\n", s)...)
	}
	nh := f.Lookup(a) // the datapath's answer
	res, ok := f.LookupRoute(a)
	if ok != (nh != nil) || ok && res.Route.NH != nh && res.Route.Type != fib.Throw {
		// The merged trie and the per-table tries disagree: a bug, never
		// papered over.
		msg := fmt.Sprintf("internal error: fast path %v, slow path %v", nh, res.Route)
		if asJSON {
			b = append(b, `{"dst":`...)
			b = strconv.AppendQuote(b, s)
			b = append(b, `,"error":`...)
			b = strconv.AppendQuote(b, msg)
			return append(b, "}\n"...)
		}
		return append(b, s+": "+msg+"\n"...)
	}
	if !ok {
		if asJSON {
			return append(b, `{"dst":"`+a.String()+`","error":"network unreachable"}`+"\n"...)
		}
		return append(b, a.String()+": network unreachable\n"...)
	}
	r := res.Route
	typ := r.Type.String()
	if res.NH != nil && r.Type == fib.Unicast && res.NH.Kind.String() != "unicast" {
		typ = res.NH.Kind.String() // a route through a blackhole nexthop object
	}
	var gw, dev string
	if res.NH != nil {
		if res.NH.UsesGateway() {
			gw = res.NH.Gateway.String()
		}
		dev = res.NH.Dev
	}
	src := ""
	if res.Prefsrc.IsValid() {
		src = res.Prefsrc.String()
	}
	if asJSON {
		b = append(b, `{"dst":"`+a.String()+`","type":"`+typ+`","table":"`+fib.TableName(r.Table)+`","prefix":"`+r.Prefix.String()+`"`...)
		if gw != "" {
			b = append(b, `,"gateway":"`+gw+`"`...)
		}
		if dev != "" {
			b = append(b, `,"dev":`...)
			b = strconv.AppendQuote(b, dev)
		}
		if src != "" {
			b = append(b, `,"prefsrc":"`+src+`"`...)
		}
		b = append(b, `,"metric":`...)
		b = strconv.AppendUint(b, uint64(r.Metric), 10)
		return append(b, "}\n"...)
	}
	if typ != "unicast" {
		b = append(b, typ+" "...)
	}
	b = append(b, a.String()...)
	if gw != "" {
		b = append(b, " via "+gw...)
	}
	if dev != "" {
		b = append(b, " dev "+dev...)
	}
	if r.Table != fib.TableMain {
		b = append(b, " table "+fib.TableName(r.Table)...)
	}
	if src != "" {
		b = append(b, " src "+src...)
	}
	if r.Metric != 0 {
		b = append(b, " metric "+strconv.FormatUint(uint64(r.Metric), 10)...)
	}
	return append(b, '\n')
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
