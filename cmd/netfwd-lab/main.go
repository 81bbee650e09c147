// Command netfwd-lab is the lab: a network of real Linux hosts in namespaces
// with netfwd routing between them, in-process: the README's first command
// (`sudo go run ./cmd/netfwd-lab [--keep] [--bgp]`; `netfwd lab` runs it
// when the binary sits next to netfwd). It is its own command so that the
// router's binary links none of it (docs/architecture.md). It
// shows that the router works (internal/lab.RunDemo) and removes everything
// it created on the way out, on Ctrl-C too. A second Ctrl-C while cleaning
// up is ignored; a process killed outright leaves namespaces that the next
// `netfwd-lab` (or any lab) sweeps (vethlab.SweepStaleLabs).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/netfwd/netfwd/internal/lab"
)

func main() {
	os.Exit(runLab(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func runLab(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("netfwd-lab", flag.ContinueOnError)
	fs.SetOutput(stderr)
	keep := fs.Bool("keep", false, "leave the lab running until Ctrl-C")
	metrics := fs.String("metrics", "127.0.0.1:9477", "metrics listener (a free port when taken)")
	ctlPath := fs.String("ctl", "", "control socket (default /run/netfwd-lab-PREFIX.sock)")
	tput := fs.Duration("throughput", 3*time.Second, "length of the throughput run (0 skips it)")
	verbose := fs.Bool("v", false, "show netfwd's log")
	ioKind := fs.String("io", "auto", "netfwd's packet I/O: auto, afxdp or afpacket")
	bgp := fs.Bool("bgp", false, "routing daemons: FRR on the router's twins, BIRD on the isp, eBGP in-band, routes over FPM")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "netfwd-lab: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(stderr, "netfwd-lab: needs root (it creates network namespaces and veth pairs): sudo go run ./cmd/netfwd-lab")
		fmt.Fprintln(stderr, "  without root, try the same router offline on captured traffic: go run ./cmd/netfwd replay")
		return 1
	}
	if _, err := exec.LookPath("ip"); err != nil {
		fmt.Fprintln(stderr, "netfwd-lab: needs the ip command (apt-get install iproute2)")
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	o := lab.DemoOptions{Out: stdout, Keep: *keep, Metrics: *metrics, Ctl: *ctlPath, Throughput: *tput, IO: *ioKind, BGP: *bgp}
	if *tput == 0 {
		o.Throughput = -1
	}
	if *verbose {
		o.DaemonLog = stderr
	}
	// Cleanup runs inside RunDemo after ctx is cancelled; signals that
	// arrive meanwhile stay caught (NotifyContext keeps the handler until
	// stop), so a second Ctrl-C cannot kill the cleanup halfway.
	rep, err := lab.RunDemo(ctx, o)
	switch {
	case err != nil && errors.Is(err, context.Canceled):
		fmt.Fprintln(stderr, "netfwd-lab: interrupted; everything it created is removed")
		return 130
	case err != nil:
		fmt.Fprintln(stderr, "netfwd-lab:", err)
		return 1
	case rep.Failed() > 0:
		return 1
	}
	return 0
}
