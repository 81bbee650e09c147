package main

// `netfwd ctl [-j] [--ctl SOCKET] [LINE...]`: one request to a running
// daemon (lines from stdin when none are given). Config lines are one
// transaction; queries are answered after it. Errors come back as
// "ctl:N: reason" (exit 1); an unreachable daemon exits 2; a query answered
// with a failure exits as `ip` does (`route get` with no usable route: 2,
// an invalid address: 1; the answer, -j's error object included, is printed
// on stdout all the same).

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/netfwd/netfwd/internal/ctlsock"
)

func init() {
	register(command{
		name:  "ctl",
		usage: "[-j] [--ctl SOCKET] [LINE...]   (a line per argument, or lines on stdin)",
		run:   runCtl,
	})
}

func runCtl(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ctl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("j", false, "JSON answers")
	sock := fs.String("ctl", defaultCtl, "control socket path")
	words, ok := parseInterspersed(fs, args)
	if !ok {
		return 2
	}
	var lines []string
	if len(words) > 0 {
		// Each argument is a line; a single argument may hold several
		// (newline-separated) lines, and words of one line may also be
		// given as separate arguments when none contains a space.
		joined := true
		for _, w := range words {
			if strings.ContainsAny(w, " \n\t") {
				joined = false
			}
		}
		if joined {
			lines = []string{strings.Join(words, " ")}
		} else {
			for _, w := range words {
				lines = append(lines, strings.Split(w, "\n")...)
			}
		}
	} else {
		sc := bufio.NewScanner(stdin)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		if err := sc.Err(); err != nil {
			fmt.Fprintln(stderr, "netfwd ctl:", err)
			return 2
		}
	}
	out, status, err := ctlsock.DoStatus(*sock, lines, *asJSON)
	io.WriteString(stdout, out)
	if err != nil {
		if ctlsock.IsRequestError(err) {
			fmt.Fprintln(stderr, err)
			return 1
		}
		fmt.Fprintf(stderr, "netfwd ctl: %s: %v\n", *sock, err)
		return 2
	}
	return status // non-zero when a query's answer is a failure, as ip exits
}
