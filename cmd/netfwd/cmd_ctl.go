package main

// `netfwd ctl [-j] [--ctl SOCKET] [LINE...]`: one request to a running
// daemon (lines from stdin when none are given). Config lines are one
// transaction; queries are answered after it, streamed as they come
// (`monitor` until Ctrl-C). Errors come back as "ctl:N: reason" (exit 1);
// an unreachable daemon exits 2; a query answered with a failure exits as
// `ip` does (`route get` with no usable route: 2, an invalid address: 1;
// the answer, -j's error object included, is printed on stdout all the
// same).
//
// The arguments are read as ip reads its own: netfwd ctl's options are
// `-j`/`-json` and `--ctl SOCKET` (anywhere); every other word, options
// of the line included (`-br`, `-s`, `-4`), belongs to the line, so
// `netfwd ctl -br link show`, `netfwd ctl -s link` and `netfwd ctl '-br
// link'` all mean `ip -br link show`.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"

	"github.com/netfwd/netfwd/internal/ctlsock"
)

func init() {
	register(command{
		name:  "ctl",
		usage: "[-j] [--ctl SOCKET] [LINE...]   (a line per argument, or lines on stdin; ip's options: -s, -br, -j)",
		run:   runCtl,
	})
}

// ctlArgs splits netfwd ctl's own options from the words of the lines.
func ctlArgs(args []string) (sock string, asJSON bool, words []string, err error) {
	sock = defaultCtl
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return sock, asJSON, append(words, args[i+1:]...), nil
		case a == "-j" || a == "-json" || a == "--json" || a == "-j=true" || a == "--j":
			asJSON = true
		case a == "--ctl" || a == "-ctl":
			if i+1 == len(args) {
				return "", false, nil, fmt.Errorf("flag needs an argument: %s", a)
			}
			i++
			sock = args[i]
		case strings.HasPrefix(a, "--ctl=") || strings.HasPrefix(a, "-ctl="):
			sock = a[strings.IndexByte(a, '=')+1:]
		default:
			words = append(words, a)
		}
	}
	return sock, asJSON, words, nil
}

func runCtl(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	for _, a := range args {
		if a == "-h" || a == "--help" || a == "-help" {
			fmt.Fprintln(stderr, "usage: netfwd ctl", commands["ctl"].usage)
			fmt.Fprintln(stderr, "  `netfwd ctl help` lists what the daemon takes")
			return 0
		}
	}
	sock, asJSON, words, err := ctlArgs(args)
	if err != nil {
		fmt.Fprintln(stderr, "netfwd ctl:", err)
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
	var status int
	var notes []string
	if isCapture(lines) {
		status, notes, err = streamCapture(sock, lines, stdout)
	} else {
		status, notes, err = ctlsock.StreamNotes(sock, lines, asJSON, stdout)
	}
	for _, n := range notes {
		fmt.Fprintln(stderr, n)
	}
	if err != nil {
		if ctlsock.IsRequestError(err) {
			fmt.Fprintln(stderr, err)
			return 1
		}
		const hint = "start it with netfwd run --config FILE, or pass --ctl SOCKET"
		switch {
		case errors.Is(err, syscall.ENOENT):
			fmt.Fprintf(stderr, "netfwd is not running (no control socket at %s; %s)\n", sock, hint)
			return 2
		case errors.Is(err, syscall.ECONNREFUSED): // a socket left by a daemon that died
			fmt.Fprintf(stderr, "netfwd is not running (nothing listens on the control socket at %s; %s)\n", sock, hint)
			return 2
		}
		fmt.Fprintf(stderr, "netfwd ctl: %s: %v\n", sock, err)
		return 2
	}
	return status // non-zero when a query's answer is a failure, as ip exits
}

// isCapture: the request is one `capture` line, whose answer is pcap.
func isCapture(lines []string) bool {
	if len(lines) != 1 {
		return false
	}
	f := strings.Fields(lines[0])
	return len(f) > 0 && len(f[0]) >= 3 && strings.HasPrefix("capture", f[0])
}

// streamCapture runs a capture and writes its pcap to stdout as it comes
// (decoded from the answer's base64 lines, ctlsock/binary.go).
func streamCapture(sock string, lines []string, stdout io.Writer) (int, []string, error) {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := ctlsock.BinaryDecoder(stdout, pr)
		pr.CloseWithError(err) // a reader that stopped (tcpdump exited) ends the stream
		done <- err
	}()
	status, notes, err := ctlsock.StreamNotes(sock, lines, false, pw)
	pw.Close()
	if derr := <-done; err == nil && derr != nil {
		err = derr
	}
	return status, notes, err
}
