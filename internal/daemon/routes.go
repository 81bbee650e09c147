package daemon

// Routes from the network: the FPM server for FRR's zebra (--fpm) and the
// kernel mirror (--mirror-kernel), wired to the daemon's FIB.
//
// Flow: New opens them (openRouteSources): the FPM listener inside the
// daemon's namespace, where zebra runs and connects to 127.0.0.1; the
// mirror's sockets in the same namespace; and, for the FPM, a link table
// following the namespace's interfaces, which maps the kernel interface
// indices zebra names to netfwd devices by name. Run starts them
// (startRouteSources) and stops them with everything else; learned routes
// stay in the FIB until the process ends (or their source's sweep or stale
// timeout removes them).
// In a hot restart the successor seeds zebra's routes and reads the
// kernel's tables already in New (openRouteSources), while the running
// daemon forwards: every learned route, of every table, is in its FIB
// before it takes over.
//
// The interface hook (Options.IfaceMap) is where the host path maps a
// port's twin interface to the port; by default a kernel interface maps to
// the netfwd device of the same name (a route through an interface that is
// no netfwd port stays in the FIB, and its traffic is dropped as "no
// egress").
//
// Locking: resolveMu serialises the synchronous ifindex lookups of
// interfaces the link table has not seen yet; the sources have their own.

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/internal/fpm"
	"github.com/netfwd/netfwd/internal/kmirror"
	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/internal/rtnl"
	"github.com/netfwd/netfwd/neigh"
)

// routeSources are the daemon's routing sources.
type routeSources struct {
	fpm        *fpm.Server
	mirror     *kmirror.Mirror
	mirrorRuns bool

	links     *rtnl.LinkTable
	linkConn  *rtnl.Conn // follows links (FPM without a custom IfaceMap)
	resolveMu sync.Mutex
	resolve   *rtnl.Conn // guarded by resolveMu
	seed      *rtnl.Conn // dumps the kernel's copy of zebra's routes (fpm.SeedFromKernel)
}

// RouteSources are the counters of the daemon's routing sources (nil when
// a source is off), for metrics.
type RouteSources struct {
	FPM    *fpm.Stats
	Mirror *kmirror.Stats
}

// RouteSources returns the routing sources' counters.
func (d *Daemon) RouteSources() RouteSources {
	var s RouteSources
	if d.routes.fpm != nil {
		s.FPM = d.routes.fpm.Stats()
	}
	if d.routes.mirror != nil {
		s.Mirror = d.routes.mirror.Stats()
	}
	return s
}

// FPMAddr returns the FPM listener's address ("" without one).
func (d *Daemon) FPMAddr() string {
	if d.routes.fpm == nil {
		return ""
	}
	return d.routes.fpm.Addr().String()
}

// openRouteSources opens what the options ask for; on error the caller
// closes everything.
func (d *Daemon) openRouteSources() error {
	o := d.opts
	r := &d.routes
	iface := o.IfaceMap
	if o.FPM != "" && iface == nil {
		r.links = rtnl.NewLinkTable()
		err := pktio.InNetns(o.Netns, func() (err error) {
			if r.linkConn, err = rtnl.Open(rtnl.RTNLGRP_LINK); err != nil {
				return err
			}
			r.resolve, err = rtnl.Open()
			return err
		})
		if err != nil {
			return fmt.Errorf("fpm: interface table: %w", err)
		}
		r.linkConn.SetReadTimeout(200 * time.Millisecond)
		r.resolve.SetReadTimeout(200 * time.Millisecond)
		iface = d.ifaceByName
	}
	if o.FPM != "" {
		if err := d.loopbackUp(o.Netns, "fpm"); err != nil {
			return err
		}
		ln, err := d.takeListener("fpm", o.FPM) // a hot restart: the running daemon's socket
		if err != nil {
			return err
		}
		err = pktio.InNetns(o.Netns, func() (err error) {
			r.fpm, err = fpm.Listen(o.FPM, fpm.Options{FIB: d.e.FIB(), Iface: iface, Logger: d.log,
				AllowUsers: o.FPMAllowUsers, AllowNets: o.FPMAllowNets, Listener: ln})
			if err == nil {
				r.seed, err = rtnl.Open()
			}
			return err
		})
		if err != nil {
			return err
		}
		if d.succ != nil {
			// A hot restart: zebra's routes (every table) are in the FIB
			// before this process forwards, while the running one still
			// does, so none is missing in between.
			seed := r.seed
			r.seed = nil
			d.seedFPM(seed)
		}
	}
	if o.MirrorKernel {
		var err error
		var rename func(string) string
		if d.hp != nil {
			rename = d.portOfTwin
		}
		r.mirror, err = kmirror.New(kmirror.Options{FIB: d.e.FIB(), Netns: o.Netns, Iface: o.IfaceMap, Rename: rename,
			Neigh: d.mirrorNeigh, Logger: d.log})
		if err != nil {
			return err
		}
		if d.succ != nil {
			// A hot restart: the kernel's tables are mirrored before this
			// process forwards (Run goes on from there).
			if err := r.mirror.Sync(mirrorSyncTimeout); err != nil {
				d.log.Warn("kernel mirror: not synced before the takeover", "err", err)
			}
		}
	}
	return nil
}

// mirrorSyncTimeout bounds a successor's first read of the kernel's tables
// (a full table takes a few seconds).
const mirrorSyncTimeout = 60 * time.Second

// seedFPM installs zebra's routes from the kernel's copy that seed (nil:
// none) dumps (fpm.Server.SeedFromKernel) and closes it.
func (d *Daemon) seedFPM(seed *rtnl.Conn) {
	r := &d.routes
	if seed == nil {
		return
	}
	defer seed.Close()
	seed.SetReadTimeout(5 * time.Second)
	if _, err := r.fpm.SeedFromKernel(seed); err != nil {
		d.log.Error("fpm: seeding from the kernel", "err", err)
	}
}

// ifaceByName is the default interface hook: the kernel interface's name.
func (d *Daemon) ifaceByName(ifindex uint32) (string, bool) {
	r := &d.routes
	name, ok := r.links.Name(ifindex)
	if !ok {
		// An interface created just before zebra's route names it: ask.
		r.resolveMu.Lock()
		name, ok = r.links.Resolve(r.resolve, ifindex)
		r.resolveMu.Unlock()
	}
	return d.portOfTwin(name), ok
}

// portOfTwin maps a host-path twin's name to its interface: the daemons'
// routes through a twin go through the port.
func (d *Daemon) portOfTwin(name string) string {
	if p := d.hp.twinPort(name); p != "" {
		return p
	}
	return name
}

// mirrorNeigh installs a neighbour of the kernel as a `neigh del` or
// `neigh replace ... lladdr M nud S` line would.
func (d *Daemon) mirrorNeigh(u kmirror.NeighUpdate) error {
	cmd, err := mirrorNeighCmd(u)
	if err != nil {
		return err
	}
	return d.ctl.Apply([]config.Command{cmd})
}

// mirrorNeighCmd builds that command directly, held to the parser's rules
// (NeighCmd.Check).
func mirrorNeighCmd(u kmirror.NeighUpdate) (config.Command, error) {
	c := &config.NeighCmd{Op: "delete", IP: u.IP, Dev: u.Dev, State: neigh.NUDPermanent} // the parser's default state
	if !u.Delete {
		st, err := neigh.ParseState(u.State)
		if err != nil {
			return config.Command{}, fmt.Errorf("kernel neighbour %s dev %s: %v", u.IP, u.Dev, err)
		}
		c.Op, c.LLAddr, c.HasLLAddr, c.State = "replace", u.MAC, true, st
	}
	if err := c.Check(); err != nil {
		return config.Command{}, fmt.Errorf("kernel neighbour: %q: %v", c.String(), err)
	}
	return config.Command{Pos: config.Pos{File: "kernel-mirror"}, Text: c.String(), Neigh: c}, nil
}

// startRouteSources starts the sources' goroutines; they end when d.stop
// closes (the FPM server with closeRouteSources).
func (d *Daemon) startRouteSources(wg *sync.WaitGroup) {
	r := &d.routes
	if r.linkConn != nil {
		c := r.linkConn
		r.linkConn = nil // Follow owns and closes it
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.links.Follow(c, d.stop); err != nil {
				d.log.Error("fpm: interface table", "err", err)
			}
		}()
	}
	if r.fpm != nil {
		seed := r.seed
		r.seed = nil // the goroutine closes it
		wg.Add(1)
		go func() {
			defer wg.Done()
			// zebra's routes as the kernel has them, until zebra
			// reconnects and replays (after a restart of netfwd);
			// zebra's connection waits in the listener's backlog. (A
			// hot restart seeded them already, in openRouteSources.)
			d.seedFPM(seed)
			if err := r.fpm.Serve(); err != nil {
				d.log.Error("fpm server", "err", err)
			}
		}()
	}
	if r.mirror != nil {
		m := r.mirror
		r.mirrorRuns = true // Run closes its sockets when d.stop closes
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := m.Run(d.stop); err != nil {
				d.log.Error("kernel mirror", "err", err)
			}
		}()
	}
}

// closeRouteSources closes the sources (safe to call more than once).
func (d *Daemon) closeRouteSources() error {
	r := &d.routes
	var errs []error
	if r.fpm != nil {
		errs = append(errs, r.fpm.Close())
	}
	if r.mirror != nil && !r.mirrorRuns {
		errs = append(errs, r.mirror.Close())
	}
	if r.linkConn != nil {
		errs = append(errs, r.linkConn.Close())
		r.linkConn = nil
	}
	if r.seed != nil {
		errs = append(errs, r.seed.Close())
		r.seed = nil
	}
	r.resolveMu.Lock()
	if r.resolve != nil {
		errs = append(errs, r.resolve.Close())
		r.resolve = nil
	}
	r.resolveMu.Unlock()
	return errors.Join(errs...)
}
