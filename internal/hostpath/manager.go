package hostpath

// Manager: the twins of one network namespace and their reconciliation.
//
// Flow of Sync(specs): check every spec (defaults, name rules, duplicate
// ports and names); close the devices of twins that are no longer wanted
// or whose name changed or that broke, so their names are free; then for
// each wanted twin in order: make sure its device exists and is the one we
// opened (else re-create it), set MAC, MTU and up where the kernel's
// differ, apply the rate limits and make its IPv4 addresses exactly the
// spec's. A failing twin is reported in the SyncError and does not stop
// the others; an invalid spec leaves that port's twin as it was.
//
// Freeing a name (acquireLocked): a device of that name that is not a TAP
// is refused; with Options.Persist an existing TAP is adopted (attached to,
// or taken from a twin keeper), else a TAP nobody holds (a persistent
// leftover) is deleted; a TAP a live process holds is refused, naming the
// process; one whose holders are all exiting is waited for, up to
// Options.HolderWait.
//
// Locking: mu serialises Sync, Close and the netlink socket (one writer).
// Datapath readers find twins through an immutable map published in snap
// (Twin), and use only the Twin's atomics.

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Options configure a Manager.
type Options struct {
	// Netns is the named network namespace (`ip netns`) of the twins; ""
	// is the caller's.
	Netns string
	// Inject receives every frame the kernel sends on a twin, on that
	// twin's reader goroutine; the frame is valid during the call only.
	// It returns whether the frame was taken (counted as injected) or
	// not (an inject error). It must not block for long (the twin reads
	// nothing meanwhile) and must not call Sync or Close (they wait for
	// the reader goroutines). Required.
	Inject func(t *Twin, frame []byte) bool
	// QueueBytes is the size of each twin's punt queue; 0 means 1 MiB, the
	// least is 64 KiB. A frame larger than a quarter of it is refused
	// (a punt error): GSO super-frames (up to 64 KiB) need 256 KiB.
	QueueBytes int
	// HolderWait bounds the wait for an exiting process that still holds
	// a twin's name; 0 means 3 s.
	HolderWait time.Duration
	// KeepKernelARPReplies passes the kernel's ARP replies to Inject. By
	// default they are dropped (netfwd answers ARP itself; see arp.go).
	KeepKernelARPReplies bool
	// Logger gets leftovers replaced, waits and broken twins; nil means
	// slog.Default().
	Logger *slog.Logger
	// Persist makes the twins outlive the Manager: TAPs are persistent,
	// Close leaves them (addresses, ifindex, MAC) in place, and a Sync
	// adopts an existing twin of the same name instead of replacing it.
	// Twins that Sync drops are deleted. RemoveTwins deletes the rest.
	Persist bool
	// Predecessor is the pid of the netfwd a hot restart takes over from
	// (0: none): it still holds the twins' files while this Manager starts,
	// so it is not a live holder that refuses a twin; its file is taken
	// (pidfd_getfd) when no keeper holds one.
	Predecessor int
	// Keeper is the command (argv) of a twin keeper (keeper.go), which
	// keeps the twins attached, and so their carrier up, between this
	// process and the next; it must call RunKeeper. Empty: no keeper.
	Keeper []string
	// KeeperLinger is how long a keeper holds the twins after this
	// process exited; 0 means one minute.
	KeeperLinger time.Duration
}

// ErrClosed is returned by Sync after Close.
var ErrClosed = errors.New("hostpath: manager closed")

// Manager owns the twins of one namespace.
type Manager struct {
	opts Options
	log  *slog.Logger
	snap atomic.Pointer[map[string]*Twin]

	// holders finds the processes holding a TAP name (tapHolders on
	// /proc; tests replace it).
	holders func(name string) []holder

	mu       sync.Mutex
	nl       *rtnl            // guarded by mu
	twins    map[string]*Twin // by port; guarded by mu
	closed   bool             // guarded by mu
	rpWarned bool             // guarded by mu
	nsID     string           // the namespace's netnsID (keeper.go)
	keeper   *keeperProc      // guarded by mu; keeper.go
	// oldKeepers are keepers of earlier processes whose files this
	// Manager took: ended once its own keeper holds them. Guarded by mu.
	oldKeepers []int
	// extra are the files the keeper holds besides the twins' (KeepAlso),
	// by key; the Manager owns them. Guarded by mu.
	extra map[string]*os.File
}

// New opens the netlink socket in the namespace. No twin exists until Sync.
func New(opts Options) (*Manager, error) {
	if opts.Inject == nil {
		return nil, errors.New("hostpath: Options.Inject is required")
	}
	if opts.QueueBytes == 0 {
		opts.QueueBytes = 1 << 20
	}
	opts.QueueBytes = max(opts.QueueBytes, 64<<10)
	if opts.HolderWait == 0 {
		opts.HolderWait = 3 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	nl, err := dialRtnl(opts.Netns)
	if err != nil {
		return nil, fmt.Errorf("hostpath: %w", err)
	}
	nsID, err := netnsID(opts.Netns)
	if err != nil {
		nl.close()
		return nil, fmt.Errorf("hostpath: %w", err)
	}
	m := &Manager{opts: opts, log: opts.Logger, nl: nl, twins: map[string]*Twin{}, nsID: nsID,
		holders: func(name string) []holder { return tapHolders("/proc", name) }}
	m.publishLocked()
	return m, nil
}

// Twin returns the twin of port, or nil. Lock-free: datapath code may
// call it, though it is meant for building per-port tables after Sync.
func (m *Manager) Twin(port string) *Twin { return (*m.snap.Load())[port] }

// Twins returns every twin, ordered by port.
func (m *Manager) Twins() []*Twin {
	s := *m.snap.Load()
	out := slices.Collect(maps.Values(s))
	slices.SortFunc(out, func(a, b *Twin) int { return strings.Compare(a.port, b.port) })
	return out
}

func (m *Manager) sortedTwinsLocked() []*Twin {
	out := slices.Collect(maps.Values(m.twins))
	slices.SortFunc(out, func(a, b *Twin) int { return strings.Compare(a.port, b.port) })
	return out
}

func (m *Manager) publishLocked() {
	s := maps.Clone(m.twins)
	if s == nil {
		s = map[string]*Twin{}
	}
	m.snap.Store(&s)
}

// TwinError is the failure of one twin in a Sync.
type TwinError struct {
	Port, Name string
	Err        error
}

func (e *TwinError) Error() string {
	return fmt.Sprintf("twin %s of %s: %v", e.Name, e.Port, e.Err)
}

func (e *TwinError) Unwrap() error { return e.Err }

// SyncError lists the twins a Sync could not bring to their spec.
type SyncError struct{ Twins []*TwinError }

func (e *SyncError) Error() string {
	s := make([]string, len(e.Twins))
	for i, t := range e.Twins {
		s[i] = t.Error()
	}
	return "hostpath: " + strings.Join(s, "; ")
}

func (e *SyncError) Unwrap() []error {
	out := make([]error, len(e.Twins))
	for i, t := range e.Twins {
		out[i] = t
	}
	return out
}

// Sync makes the twins match specs (one per wanted twin; see the file
// comment). It returns nil or a *SyncError. Calling it again with the same
// specs changes nothing.
func (m *Manager) Sync(specs []Spec) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	var errs []*TwinError
	fail := func(s Spec, err error) { errs = append(errs, &TwinError{Port: s.Port, Name: s.Name, Err: err}) }

	want := map[string]Spec{}
	keep := map[string]bool{} // invalid specs: their twins stay as they are
	nameOf := map[string]string{}
	var order []string
	for _, s := range specs {
		s, err := s.normalized()
		if err == nil {
			if _, dup := want[s.Port]; dup {
				err = errors.New("port listed twice")
			} else if other, dup := nameOf[s.Name]; dup {
				err = fmt.Errorf("name already taken by the twin of %s", other)
			}
		}
		if err != nil {
			fail(s, err)
			keep[s.Port] = true
			continue
		}
		want[s.Port] = s
		nameOf[s.Name] = s.Port
		order = append(order, s.Port)
	}

	// Free names first: a twin renamed to another's old name, or two
	// twins swapping names, must find them free.
	for port, t := range m.twins {
		s, ok := want[port]
		switch {
		case !ok && !keep[port]:
			t.closeDev(true)
			delete(m.twins, port)
		case ok:
			if d := t.dev.Load(); d != nil && (d.name != s.Name || d.broken.Load()) {
				t.closeDev(true)
			}
		}
	}

	cur, err := m.nl.addrs()
	if err != nil {
		for _, port := range order {
			fail(want[port], err)
		}
		m.publishLocked()
		return &SyncError{Twins: errs}
	}
	byIndex := map[int][]kernelAddr{}
	for _, a := range cur {
		byIndex[a.index] = append(byIndex[a.index], a)
	}
	for _, port := range order {
		s := want[port]
		t := m.twins[port]
		if t == nil {
			t = newTwin(m, port)
			m.twins[port] = t
		}
		if err := m.syncTwinLocked(t, s, byIndex); err != nil {
			fail(s, err)
		}
	}
	m.publishLocked()
	m.keepLocked()
	if errs != nil {
		return &SyncError{Twins: errs}
	}
	return nil
}

// syncTwinLocked brings one twin to s.
func (m *Manager) syncTwinLocked(t *Twin, s Spec, addrs map[int][]kernelAddr) error {
	for c := range NumClasses {
		t.lim[c].SetLimit(s.Limits[c]) // checked by normalized
	}
	var cur []kernelAddr
	if d := t.dev.Load(); d != nil {
		li, err := m.nl.linkByName(d.name)
		switch {
		case errors.Is(err, errNoLink) || err == nil && li.index != d.index:
			m.log.Warn("hostpath: twin vanished; re-creating it", "twin", d.name, "port", t.port)
			t.closeDev(false)
		case err != nil:
			return err
		default:
			if li.mac != s.MAC || li.mtu != s.MTU || li.flags&unix.IFF_UP == 0 {
				if err := m.nl.setLink(d.index, s.MAC, s.MTU); err != nil {
					return err
				}
			}
			if s.DisableIPv6 != t.spec.DisableIPv6 {
				if _, err := applySysctls(m.opts.Netns, d.name, s.DisableIPv6); err != nil {
					return fmt.Errorf("sysctl: %w", err)
				}
			}
			cur = addrs[d.index]
		}
	}
	if t.dev.Load() == nil {
		if err := m.openDevLocked(t, s); err != nil {
			return err
		}
		cur = addrs[t.dev.Load().index] // an adopted twin has its addresses
	}
	t.spec = s
	return m.syncAddrsLocked(t.dev.Load().index, cur, s.Addrs)
}

// openDevLocked gets the twin's TAP device (created, or adopted: see
// acquireLocked), brings it to s and starts it.
func (m *Manager) openDevLocked(t *Twin, s Spec) error {
	f, adopted, err := m.acquireLocked(s.Name)
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
		}
	}()
	li, err := m.nl.linkByName(s.Name)
	if err != nil {
		return err
	}
	// An adopted twin is changed only where it differs: an unchanged one
	// causes no link message at all, so the routing daemons see nothing.
	if !adopted || li.mac != s.MAC || li.mtu != s.MTU || li.flags&unix.IFF_UP == 0 {
		if err := m.nl.setLink(li.index, s.MAC, s.MTU); err != nil {
			return err
		}
	}
	if want := twinAlias(t.port); li.alias != want {
		if err := m.nl.setAlias(li.index, want); err != nil {
			return err
		}
	}
	allRP, err := applySysctls(m.opts.Netns, s.Name, s.DisableIPv6)
	if err != nil {
		return fmt.Errorf("sysctl: %w", err)
	}
	if allRP != "0" && !m.rpWarned {
		m.rpWarned = true
		m.log.Warn("hostpath: net.ipv4.conf.all.rp_filter is set in the twins' namespace; the kernel may drop punted packets from sources it has no route to", "rp_filter", allRP)
	}
	if err := setCarrier(f, t.carrier.Load()); err != nil {
		return err
	}
	fd := -1
	if rc, err := f.SyscallConn(); err == nil {
		rc.Control(func(v uintptr) { fd = int(v) })
	}
	ok = true
	if adopted {
		m.log.Info("hostpath: adopted an existing twin", "twin", s.Name, "port", t.port, "ifindex", li.index)
	}
	t.startDev(&tapDev{name: s.Name, index: li.index, f: f, fd: fd})
	return nil
}

// acquireLocked returns an open file attached to the TAP device name, and
// whether the device existed (adopted). Without Options.Persist the name
// must be free: a TAP nobody holds is removed and a new one created. With
// it, an existing single-queue TAP is adopted: attached to when nobody
// holds it (a twin of an earlier netfwd whose keeper is gone), or its file
// taken out of a twin keeper (keeper.go) when that is the only holder
// besides exiting processes. A device of that name that is not a TAP is
// refused; a TAP a live process holds is refused, naming the process; one
// whose holders are all exiting is waited for, up to Options.HolderWait.
func (m *Manager) acquireLocked(name string) (*os.File, bool, error) {
	deadline := time.Now().Add(m.opts.HolderWait)
	waited := false
	for {
		li, err := m.nl.linkByName(name)
		if errors.Is(err, errNoLink) {
			f, err := openTAP(m.opts.Netns, name, m.opts.Persist)
			if errors.Is(err, errNameTaken) {
				return nil, false, errors.New("the name was taken while the twin was being created")
			}
			return f, false, err
		}
		if err != nil {
			return nil, false, err
		}
		if !li.isTAP() {
			kind := li.kind
			if kind == "" {
				kind = "none"
			}
			return nil, false, fmt.Errorf("%s exists and is not a TAP device (kind %s)", name, kind)
		}
		if m.opts.Persist && !li.tunMultiQueue {
			f, err := attachTAP(m.opts.Netns, name)
			switch {
			case err == nil:
				if !li.tunPersist {
					if err := tunIoctl(f, unix.TUNSETPERSIST, 1); err != nil {
						f.Close()
						return nil, false, err
					}
				}
				return f, true, nil
			case errors.Is(err, errNameTaken):
				err = errHeld
			}
			if !errors.Is(err, errHeld) {
				return nil, false, fmt.Errorf("%s: %w", name, err)
			}
		} else {
			err = m.nl.releaseTAP(m.opts.Netns, li)
			switch {
			case err == nil:
				m.log.Info("hostpath: replaced a leftover TAP", "twin", name, "persistent", li.tunPersist)
				continue
			case errors.Is(err, unix.ENODEV):
				continue // gone meanwhile
			case !errors.Is(err, errHeld):
				return nil, false, fmt.Errorf("%s: %w", name, err)
			}
		}
		// A process holding a TAP of this name in another namespace is
		// no holder here.
		hs := inNetns(m.holders(name), m.nsID)
		pred := func(h holder) bool { return m.opts.Predecessor != 0 && h.pid == m.opts.Predecessor }
		live := slices.DeleteFunc(slices.Clone(hs), func(h holder) bool { return h.exiting || h.keeper || pred(h) })
		expired := time.Now().After(deadline)
		if k := slices.IndexFunc(hs, func(h holder) bool { return h.keeper && !h.exiting }); len(live) == 0 && k >= 0 && m.opts.Persist {
			f, err := takeFromKeeper(hs[k], name)
			if err == nil {
				m.oldKeepers = append(m.oldKeepers, hs[k].pid)
				return f, true, nil
			}
			m.log.Warn("hostpath: cannot take a twin from its keeper", "twin", name, "keeper", hs[k].pid, "err", err)
		}
		if k := slices.IndexFunc(hs, pred); len(live) == 0 && k >= 0 && m.opts.Persist {
			f, err := takeFromKeeper(hs[k], name) // the same pidfd_getfd; the predecessor exits by itself
			if err == nil {
				return f, true, nil
			}
			m.log.Warn("hostpath: cannot take a twin from the previous netfwd", "twin", name, "pid", hs[k].pid, "err", err)
		}
		switch {
		case len(live) > 0:
			return nil, false, fmt.Errorf("%s is a TAP held open by a running process: %s", name, holderList(live))
		case expired && len(hs) == 0:
			return nil, false, fmt.Errorf("%s is a TAP held open by a process that cannot be found", name)
		case expired:
			return nil, false, fmt.Errorf("%s is still held open after %v by exiting process %s", name, m.opts.HolderWait, holderList(hs))
		}
		// Every holder is exiting, or the holder let go between our
		// attempt and the scan: look again shortly.
		if !waited && len(hs) > 0 {
			waited = true
			m.log.Info("hostpath: waiting for an exiting process to release a twin's name", "twin", name, "holders", holderList(hs))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// twinAlias is the ifalias a twin carries (`ip link` shows it): it marks
// the device as netfwd's, for RemoveTwins.
func twinAlias(port string) string { return TwinAliasPrefix + port }

// TwinAliasPrefix starts the ifalias of every twin ("netfwd twin of eth1").
const TwinAliasPrefix = "netfwd twin of "

func holderList(hs []holder) string {
	s := make([]string, len(hs))
	for i, h := range hs {
		s[i] = h.String()
	}
	return strings.Join(s, ", ")
}

// Close lets go of every twin and closes the netlink socket: without
// Options.Persist the TAP devices vanish; with it they stay, held by the
// keeper if there is one, for the next process to adopt. Twins kept by
// callers drop their punts from now on.
func (m *Manager) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	for _, t := range m.twins {
		t.closeDev(false)
	}
	if m.keeper != nil && !m.opts.Persist {
		m.keeper.stop() // it would keep the twins alive
		m.keeper = nil
	}
	m.closeExtraLocked() // a keeper that stays holds its own copies
	clear(m.twins)
	m.publishLocked()
	return m.nl.close()
}
