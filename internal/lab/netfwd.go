package lab

// StartNetfwd runs netfwd in-process as the router of a lab network: the
// daemon's own code (internal/daemon: the function behind `netfwd run`),
// given the network's generated config file, its ports opened in the
// router namespace, its metrics listener and control socket in the
// caller's namespace (so http://127.0.0.1:9477/metrics and `netfwd ctl`
// work from the shell that started the lab).
//
// Locking: none; a Router is started and stopped by one goroutine.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/netfwd/netfwd/internal/ctlsock"
	"github.com/netfwd/netfwd/internal/daemon"
)

// RouterOptions say how to run netfwd.
type RouterOptions struct {
	// Metrics is the listener address ("" none, "127.0.0.1:0" any port).
	Metrics string
	// Ctl is the control socket path ("" none).
	Ctl string
	// Workers is the number of receive queues per port (0: GOMAXPROCS).
	Workers int
	// IO is the packet I/O (--io: auto, afxdp, afpacket; "" = auto).
	IO string
	// Log receives the daemon's log (nil: discarded).
	Log io.Writer
	// HostPath gives the router's interfaces Linux twins (--host-path).
	HostPath bool
	// FPM is the FPM listen address in the router namespace ("" none).
	FPM string
	// Dir holds the config file (default: a new temporary directory,
	// removed by Stop).
	Dir string
}

// Router is netfwd running in-process on a lab network.
type Router struct {
	D          *daemon.Daemon
	ConfigFile string
	CtlPath    string

	dir     string
	ownDir  bool
	cancel  context.CancelFunc
	done    chan error
	stopped bool
}

// StartNetfwd writes n's config and starts the daemon on it.
func StartNetfwd(n *Net, o RouterOptions) (*Router, error) {
	return StartRouterConfig(n.Router, n.Spec.Config(), o)
}

// StartRouterConfig starts the daemon with config text, its ports in
// namespace netns.
func StartRouterConfig(netns, config string, o RouterOptions) (*Router, error) {
	r := &Router{dir: o.Dir, CtlPath: o.Ctl}
	if r.dir == "" {
		d, err := os.MkdirTemp("", "netfwd-lab-")
		if err != nil {
			return nil, err
		}
		r.dir, r.ownDir = d, true
	}
	r.ConfigFile = filepath.Join(r.dir, "router.conf")
	if err := os.WriteFile(r.ConfigFile, []byte(config), 0o644); err != nil {
		r.cleanDir()
		return nil, err
	}
	logw := o.Log
	if logw == nil {
		logw = io.Discard
	}
	d, err := daemon.New(daemon.Options{
		ConfigFile: r.ConfigFile,
		Metrics:    o.Metrics,
		Ctl:        o.Ctl,
		Workers:    o.Workers,
		IO:         o.IO,
		Netns:      netns,
		HostPath:   o.HostPath,
		FPM:        o.FPM,
		Logger:     slog.New(slog.NewTextHandler(logw, nil)),
	})
	if err != nil {
		r.cleanDir()
		return nil, fmt.Errorf("netfwd: %w", err)
	}
	r.D = d
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan error, 1)
	go func() { r.done <- d.Run(ctx) }()
	return r, nil
}

// MetricsURL is the metrics endpoint ("" without a listener).
func (r *Router) MetricsURL() string {
	if a := r.D.MetricsAddr(); a != "" {
		return "http://" + a + "/metrics"
	}
	return ""
}

// WaitUp waits until netfwd sees every port in ports up (carrier and admin
// state): a veth made just before the daemon opened it may report its
// carrier a moment later, and until then the router treats it as down.
func (r *Router) WaitUp(ports []string, timeout time.Duration) error {
	c := r.D.Controller()
	deadline := time.Now().Add(timeout)
	for {
		var down []string
		for _, p := range ports {
			if c.CarrierDown(p) || c.AdminDown(p) {
				down = append(down, p)
			}
		}
		if len(down) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("lab: ports still down after %v: %v", timeout, down)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Ctl sends lines to the daemon's control socket, as `netfwd ctl` does.
func (r *Router) Ctl(lines ...string) (string, error) {
	if r.CtlPath == "" {
		return "", errors.New("lab: router has no control socket")
	}
	return ctlsock.Do(r.CtlPath, lines, false)
}

// Stop stops the daemon and waits for it; it removes the config directory
// when StartNetfwd created it. Safe to call twice.
func (r *Router) Stop() error {
	if r.stopped {
		return nil
	}
	r.stopped = true
	r.cancel()
	err := <-r.done
	r.cleanDir()
	return err
}

func (r *Router) cleanDir() {
	if r.ownDir {
		os.RemoveAll(r.dir)
	}
}
