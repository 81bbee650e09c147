// Command netfwd is the IPv4 router and VLAN-aware bridge: the daemon
// (`netfwd run`), its offline tools (`route get`, `route show`, `replay`)
// and, as their own commands, the lab (cmd/netfwd-lab) and the benchmarks
// (cmd/netfwd-bench), which `netfwd lab` and `netfwd bench` run when
// installed beside it.
//
// Flow: main looks the first argument up in the command table that the
// cmd_*.go files fill from init, and hands it the remaining arguments.
// Each command owns its flags; exit status 2 is a usage error, 1 a failure.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// command is one `netfwd NAME ...` verb.
type command struct {
	name  string
	usage string // one line: arguments after the name
	run   func(args []string, stdin io.Reader, stdout, stderr io.Writer) int
}

var commands = map[string]command{}

func register(c command) {
	if _, dup := commands[c.name]; dup {
		panic("duplicate command " + c.name)
	}
	commands[c.name] = c
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: netfwd COMMAND [ARGS]")
	var names []string
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  netfwd %s %s\n", n, commands[n].usage)
	}
}

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func dispatch(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if args[0] == "--version" || args[0] == "-version" {
		args = []string{"version"}
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "netfwd: unknown command %q\n", strings.Join(args[:1], ""))
		usage(stderr)
		return 2
	}
	return c.run(args[1:], stdin, stdout, stderr)
}

// parseInterspersed parses flags that may stand anywhere among the words,
// as ip's do (`netfwd route show -j`, `netfwd ctl route show -j`): in rounds,
// each taking the flags up to the next word. It returns the words, and false
// on a flag error (which fs has reported).
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, bool) {
	var words []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, false
		}
		if fs.NArg() == 0 {
			return words, true
		}
		words = append(words, fs.Arg(0))
		args = fs.Args()[1:]
	}
}
