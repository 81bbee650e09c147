package daemon

// The host path (--host-path): every router interface (routed port, VLAN
// interface of a bridge, a bridge with addresses) gets a Linux twin in the
// ports' namespace (internal/hostpath), so the box's own daemons (BGP, SSH,
// BFD) talk through netfwd's ports. docs/hostpath.md has the design.
//
// Flow:
//   - punt: each datapath worker's l3.Worker has a Punter (punt below) that
//     looks up the twin of the interface and copies the frame into its
//     queue (PuntPacket: rate limited per class, never blocking); the
//     twin's writer goroutine writes it into the TAP;
//   - inject: each twin's reader goroutine hands the kernel's frames to
//     injector.inject, which sends them out of the interface through an
//     l3.Worker and transmit handles of its own (sendmmsg): control
//     traffic never waits behind a worker's data batch;
//   - reconcile: one goroutine (syncLoop) keeps the twins equal to the
//     router's interfaces: names, MACs, MTUs, the configured addresses
//     (netfwd -> kernel, one direction), carrier following the interface's
//     state, and the link-layer multicast groups the kernel joined on the
//     twin of a VLAN interface (so the bridge delivers OSPF's 224.0.0.5 to
//     the host). It runs at start, after a reload and every syncPeriod;
//     each pass compares a snapshot and touches the kernel only on change,
//     or when a twin vanished (twinwatch.go).
//
// Locking: the Punter runs on its worker and only loads atomics (the
// Manager's twin snapshot). injector.mu serialises the twins' readers on
// the injector's l3.Worker; the injector is a tableUser, so retiring a port
// waits until it let go of the port's handles. The reconcile state belongs
// to syncLoop's goroutine (and New, before it starts).

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"maps"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/hostpath"
	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/l2"
	"github.com/netfwd/netfwd/l3"
	"github.com/netfwd/netfwd/wire"
)

// syncPeriod is how often the reconcile loop compares the router's
// interfaces with the twins.
const syncPeriod = 250 * time.Millisecond

// syncRetry is how often a Sync that failed is tried again.
const syncRetry = 2 * time.Second

type hostPath struct {
	d   *Daemon
	m   *hostpath.Manager
	inj *injector

	kick  chan struct{} // a reconcile now (reload, ctl)
	watch twinWatch     // twins that vanished: a Sync although the specs did not change (twinwatch.go)

	byTwinName atomic.Pointer[map[string]string] // twin name -> port, for twinPort

	// Reconcile state (syncLoop's goroutine).
	last     []hostpath.Spec
	failed   bool      // the last Sync reported errors
	retryAt  time.Time // when a failed Sync is tried again
	carrier  map[string]bool
	guardIDs []uint64                     // the port guards (kernelGuard.id) the keeper was last given (keepGuards)
	groups   map[string]map[wire.MAC]bool // VLAN interface -> groups joined for its twin
}

// openHostPath creates the twins of the configured interfaces.
func (d *Daemon) openHostPath() error {
	hp := &hostPath{d: d, kick: make(chan struct{}, 1), carrier: map[string]bool{}, groups: map[string]map[wire.MAC]bool{}}
	hp.inj = &injector{d: d, w: d.e.NewWorker(), txs: txSet{mode: txLight}}
	hp.inj.sendFn = func(p *l2.Port, frames [][]byte, origins []int32) {
		hp.inj.txs.send(hp.inj.w, p, frames, origins, nil)
	}
	// The twins outlive the daemon (Persist) and are adopted by the next
	// one: a restart changes nothing the routing daemons see.
	m, err := hostpath.New(hostpath.Options{Netns: d.opts.Netns, Inject: hp.inj.inject, Logger: d.log,
		Persist: true, Keeper: d.opts.TwinKeeper, Predecessor: d.predecessorPID()})
	if err != nil {
		return err
	}
	hp.m = m
	d.hp = hp
	hp.reconcile()
	for _, w := range d.workers {
		w.w.SetPunter(w.punt, d.opts.PuntEcho)
	}
	return nil
}

// punt is a worker's Punter: the frame goes to the twin of ifc, with the
// offload state of the input frame it is.
func (iw *ioWorker) punt(ifc *l3.Iface, f []byte, l3off int, origin int32) bool {
	tw := iw.d.hp.m.Twin(ifc.Name)
	if tw == nil {
		return false
	}
	var off pktio.Offload
	if origin >= 0 && int(origin) < len(iw.cur) {
		off = iw.cur[origin].Offload
	}
	tw.PuntPacket(f, l3off, off) // a refusal is counted by the twin
	return true
}

// twinPort maps a twin's interface name to its port ("" if none). FPM and
// the kernel mirror ask once per route message: a map published by the
// reconcile loop, not a walk of the twins.
func (hp *hostPath) twinPort(name string) string {
	if hp == nil {
		return ""
	}
	if m := hp.byTwinName.Load(); m != nil {
		return (*m)[name]
	}
	return ""
}

// requestSync asks the reconcile loop for a pass now, with a Sync (a
// twin that vanished is re-created: SIGHUP re-syncs the twins).
func (hp *hostPath) requestSync() {
	if hp == nil {
		return
	}
	hp.watch.force.Store(true)
	select {
	case hp.kick <- struct{}{}:
	default:
	}
}

// syncLoop reconciles until stop closes.
func (hp *hostPath) syncLoop(stop <-chan struct{}) {
	t := time.NewTicker(syncPeriod)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-hp.kick:
		case <-t.C:
		}
		hp.reconcile()
	}
}

// specs builds the wanted twins from the router's interfaces.
func (hp *hostPath) specs() []hostpath.Spec {
	addrs := map[string][]netip.Prefix{}
	for _, a := range hp.d.e.FIB().Addresses() {
		if a.Owner == fib.OwnerConfig {
			addrs[a.Dev] = append(addrs[a.Dev], a.Prefix)
		}
	}
	var specs []hostpath.Spec
	for _, ifc := range hp.d.e.Router().Ifaces() {
		if ifc.Kind == l3.IfaceBridge && len(addrs[ifc.Name]) == 0 {
			continue // a bridge is an L3 interface only with addresses
		}
		specs = append(specs, hostpath.Spec{Port: ifc.Name, Name: hp.d.opts.TwinNames[ifc.Name], MAC: ifc.MAC, MTU: ifc.MTU,
			Addrs: addrs[ifc.Name], Limits: hp.d.opts.PuntLimits})
	}
	slices.SortFunc(specs, func(a, b hostpath.Spec) int { return strings.Compare(a.Port, b.Port) })
	return specs
}

func sameSpecs(a, b []hostpath.Spec) bool {
	return slices.EqualFunc(a, b, func(x, y hostpath.Spec) bool {
		return x.Port == y.Port && x.Name == y.Name && x.MAC == y.MAC && x.MTU == y.MTU &&
			slices.Equal(x.Addrs, y.Addrs) && x.Limits == y.Limits && x.DisableIPv6 == y.DisableIPv6
	})
}

// reconcile makes the twins follow the router's interfaces.
func (hp *hostPath) reconcile() {
	hp.keepGuards() // before a Sync that starts a keeper: it holds them at once
	specs := hp.specs()
	if !sameSpecs(specs, hp.last) || hp.resyncDue() || hp.failed && time.Now().After(hp.retryAt) {
		// A twin that could not be made or adopted (its name held for a
		// moment) is tried again every syncRetry, not only on change; a
		// twin that vanished at once (twinwatch.go).
		err := hp.m.Sync(specs)
		if hp.failed = err != nil; hp.failed {
			hp.d.log.Error("host path", "err", err) // per twin; the others are in place
			hp.retryAt = time.Now().Add(syncRetry)
		}
		hp.last = specs
	}
	byName := map[string]*l3.Iface{}
	for _, ifc := range hp.d.e.Router().Ifaces() {
		byName[ifc.Name] = ifc
	}
	twins := hp.m.Twins()
	names := make(map[string]string, len(twins))
	for _, t := range twins {
		if t.Name() != "" {
			names[t.Name()] = t.Port()
		}
	}
	if old := hp.byTwinName.Load(); old == nil || !maps.Equal(*old, names) {
		hp.byTwinName.Store(&names)
	}
	for _, t := range twins {
		ifc := byName[t.Port()]
		if ifc == nil {
			continue
		}
		up := ifc.Up()
		if was, ok := hp.carrier[t.Port()]; !ok || was != up || t.Ifindex() == 0 {
			if err := t.SetCarrier(up); err != nil {
				hp.d.log.Error("host path carrier", "dev", t.Port(), "err", err)
				continue
			}
			hp.carrier[t.Port()] = up
		}
	}
	for port := range hp.carrier {
		if hp.m.Twin(port) == nil {
			delete(hp.carrier, port)
		}
	}
	hp.followGroups(twins, byName)
}

// keepGuards hands the twin keeper a copy of every port's kernel input
// guard when the set of guards changed (kernelguard.go says why).
func (hp *hostPath) keepGuards() {
	var ids []uint64
	ports := hp.d.ports.Load().list
	for _, p := range ports {
		if p.guard != nil {
			ids = append(ids, p.guard.id)
		}
	}
	if slices.Equal(ids, hp.guardIDs) {
		return
	}
	files := map[string]*os.File{}
	for _, p := range ports {
		if p.guard == nil {
			continue
		}
		f, err := p.guard.dup()
		if err != nil {
			continue // closed by a retire: the next table has no such port
		}
		files[p.guard.key(p.name)] = f
	}
	hp.m.KeepAlso(files)
	hp.guardIDs = ids
}

// followGroups joins the bridge, for the host, to the IPv4 multicast groups
// the kernel joined on the twins of VLAN interfaces (a routed port's
// multicast reaches l3 unfiltered), from /proc/net/dev_mcast.
func (hp *hostPath) followGroups(twins []*hostpath.Twin, byName map[string]*l3.Iface) {
	if len(hp.groups) == 0 && !slices.ContainsFunc(twins, func(t *hostpath.Twin) bool {
		ifc := byName[t.Port()]
		return ifc != nil && ifc.Bridge != nil
	}) {
		return // no VLAN twins: nothing to read every tick
	}
	var mc map[string][]wire.MAC
	err := pktio.InNetns(hp.d.opts.Netns, func() (err error) {
		mc, err = readDevMcast()
		return err
	})
	if err != nil {
		return
	}
	seen := map[string]bool{}
	for _, t := range twins {
		ifc := byName[t.Port()]
		if ifc == nil || ifc.Bridge == nil || t.Name() == "" {
			continue
		}
		seen[t.Port()] = true
		want := map[wire.MAC]bool{}
		for _, g := range mc[t.Name()] {
			if g[0] == 0x01 && g[1] == 0x00 && g[2] == 0x5e {
				want[g] = true
			}
		}
		have := hp.groups[t.Port()]
		for g := range want {
			if !have[g] {
				if err := ifc.Bridge.JoinGroup(ifc.VID, g); err != nil {
					hp.d.log.Error("host path multicast", "dev", t.Port(), "group", g, "err", err)
					delete(want, g)
				}
			}
		}
		for g := range have {
			if !want[g] {
				ifc.Bridge.LeaveGroup(ifc.VID, g)
			}
		}
		hp.groups[t.Port()] = want
	}
	for port := range hp.groups {
		if !seen[port] {
			delete(hp.groups, port) // the interface is gone, and its groups with its VLAN
		}
	}
}

// readDevMcast reads the link-layer multicast addresses per interface of
// the calling thread's namespace.
func readDevMcast() (map[string][]wire.MAC, error) {
	b, err := os.ReadFile("/proc/net/dev_mcast")
	if err != nil {
		return nil, err
	}
	out := map[string][]wire.MAC{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text()) // index name users global address
		if len(f) != 5 || len(f[4]) != 12 {
			continue
		}
		var m wire.MAC
		if _, err := hex.Decode(m[:], []byte(f[4])); err != nil {
			continue
		}
		out[f[1]] = append(out[f[1]], m)
	}
	return out, nil
}

// close lets go of the twins (they stay, for the next daemon to adopt;
// `netfwd twins remove` deletes them); their readers are gone when it
// returns, so the injector's handles can close next.
func (hp *hostPath) close() error {
	if hp == nil {
		return nil
	}
	err := hp.m.Close()
	hp.inj.close()
	return err
}

// injector sends what the kernel writes on the twins.
type injector struct {
	d      *Daemon
	mu     sync.Mutex
	w      *l3.Worker // guarded by mu
	txs    txSet      // guarded by mu
	gen    uint64     // guarded by mu
	closed bool       // guarded by mu
	seen   atomic.Uint64
	done   atomic.Bool
	sendFn func(*l2.Port, [][]byte, []int32)
}

// inject is the twins' Inject callback (on a twin's reader goroutine).
func (in *injector) inject(t *hostpath.Twin, frame []byte) bool {
	ifc := in.d.e.Router().Iface(t.Port())
	if ifc == nil || !ifc.Up() {
		return false
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		return false
	}
	in.followLocked()
	in.w.Inject(ifc, frame)
	in.w.FlushOrigins(in.sendFn)
	return true
}

func (in *injector) followLocked() {
	if t := in.d.ports.Load(); t.gen != in.gen {
		in.txs.follow(in.d, t, nil)
		in.gen = t.gen
	}
	in.seen.Store(in.gen)
}

// wake catches up with the port table unless an inject is running (it
// catches up itself; the retirer wakes again).
func (in *injector) wake() {
	if in.mu.TryLock() {
		if !in.closed {
			in.followLocked()
		}
		in.mu.Unlock()
	}
}

func (in *injector) caughtUp(gen uint64) bool { return in.done.Load() || in.seen.Load() >= gen }

func (in *injector) close() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.closed = true
	in.done.Store(true)
	in.txs.closeAll()
}
