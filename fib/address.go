package fib

// Interface addresses and the routes the kernel derives from them
// (fib_add_ifaddr): for `address add A/L dev D`
//   local A                  table local, proto kernel, scope host, src P
//   broadcast <last of A/L>  table local, proto kernel, scope link, src P  (L < 31, D up)
//   A/L (network)            table main,  proto kernel, scope link, src A  (primary, L < 32, D up)
// where P is the primary address of A's subnet on D (A itself unless A is a
// secondary: a second address in a subnet D already has).
//
// Flow: every address or link change computes the derived routes of the
// device before and after, and applies the difference. That one mechanism
// covers add, delete (a primary takes its secondaries with it, Linux's default
// promote_secondaries=0) and link down/up (down keeps only local routes, as the
// kernel does). Deleting the last address of a device flushes the routes
// through it (fib_disable_ip).
//
// Locking: inside a Txn.

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/netfwd/netfwd/nexthop"
)

// Address is one interface address.
type Address struct {
	Dev       string
	Prefix    netip.Prefix // the address with its prefix length (not masked)
	Secondary bool
	// Owner: the configuration's addresses derive routes; the kernel
	// mirror's (owned_address.go) only take part in source selection and
	// IsLocalAddress, because the mirror copies the kernel's derived routes
	// as they are.
	Owner Owner
}

// ErrAddrNotFound is the kernel's EADDRNOTAVAIL.
var ErrAddrNotFound = errors.New("cannot assign requested address")

// AddAddress adds an address to a device.
func (tx *Txn) AddAddress(dev string, p netip.Prefix) error {
	if dev == "" {
		return errors.New("no device specified")
	}
	if !p.IsValid() || !p.Addr().Is4() {
		return fmt.Errorf("invalid IPv4 address %q", p)
	}
	before := tx.devAddrs(dev)
	secondary := false
	for _, a := range before {
		if a.Prefix.Bits() == p.Bits() && a.Prefix.Masked() == p.Masked() {
			if a.Prefix.Addr() == p.Addr() {
				return ErrExists
			}
			secondary = true
		}
	}
	addrs := slices.Clone(tx.next.addrs)
	tx.next.addrs = append(addrs, Address{Dev: dev, Prefix: p, Secondary: secondary})
	return tx.syncDerived(dev, before, tx.f.nhs.DevUp(dev))
}

// DelAddress removes an address from a device (matching address and length).
func (tx *Txn) DelAddress(dev string, p netip.Prefix) error {
	before := tx.devAddrs(dev)
	i := slices.IndexFunc(tx.next.addrs, func(a Address) bool { return a.Owner == OwnerConfig && a.Dev == dev && a.Prefix == p })
	if i < 0 {
		return ErrAddrNotFound
	}
	gone := tx.next.addrs[i]
	// Deleting a primary address deletes the secondaries of its subnet with
	// it: Linux's default (net.ipv4.conf.*.promote_secondaries = 0).
	tx.next.addrs = slices.DeleteFunc(slices.Clone(tx.next.addrs), func(a Address) bool {
		return a == gone || !gone.Secondary && a.Owner == OwnerConfig && a.Dev == dev && a.Secondary &&
			a.Prefix.Bits() == p.Bits() && a.Prefix.Masked() == p.Masked()
	})
	if err := tx.syncDerived(dev, before, tx.f.nhs.DevUp(dev)); err != nil {
		return err
	}
	if len(tx.devAddrs(dev)) == 0 {
		tx.flushDev(dev)
	}
	return nil
}

// Addresses returns the addresses of the published state, in order added.
func (f *FIB) Addresses() []Address { return slices.Clone(f.cur.Load().addrs) }

// IsLocalAddress reports whether a is one of the router's addresses.
func (f *FIB) IsLocalAddress(a netip.Addr) bool {
	for _, x := range f.cur.Load().addrs {
		if x.Prefix.Addr() == a {
			return true
		}
	}
	return false
}

// devAddrs lists the configuration's addresses of dev (the ones that derive
// routes).
func (tx *Txn) devAddrs(dev string) []Address {
	var out []Address
	for _, a := range tx.next.addrs {
		if a.Dev == dev && a.Owner == OwnerConfig {
			out = append(out, a)
		}
	}
	return out
}

// ConfigDerives reports whether r is one of the routes the configuration's
// addresses on its device derive when the device is up, whether or not
// the device is up now: the kernel's own copy of such a route on a twin
// (the host path gives the twin netfwd's addresses) is no news to netfwd,
// also while the port is down and netfwd's route withdrawn.
func (tx *Txn) ConfigDerives(r *LearnedRoute) bool {
	if r.NH == nil || r.NH.Gateway.IsValid() || r.NH.Group != nil {
		return false
	}
	tmpl := &Route{Owner: OwnerConfig, Table: r.Table, Prefix: r.Prefix, Type: r.Type, Proto: r.Proto, Scope: r.Scope,
		Src: r.Src, Metric: r.Metric, NH: &nexthop.Nexthop{Kind: r.NH.Kind, Dev: r.NH.Dev}}
	if tmpl.Table == 0 {
		tmpl.Table = TableMain
	}
	for _, d := range derived(tx.devAddrs(r.NH.Dev), true, tx.devTable(r.NH.Dev)) {
		if sameDerived(d, tmpl) {
			return true
		}
	}
	return false
}

// derived lists the routes the kernel derives from a device's addresses;
// vrf is the table of the device's VRF (0: none; then local and main).
func derived(addrs []Address, up bool, vrf uint32) []*Route {
	localT, mainT := TableLocal, TableMain
	if vrf != 0 {
		localT, mainT = vrf, vrf
	}
	primaryOf := func(a Address) netip.Addr {
		for _, b := range addrs {
			if !b.Secondary && b.Prefix.Bits() == a.Prefix.Bits() && b.Prefix.Masked() == a.Prefix.Masked() {
				return b.Prefix.Addr()
			}
		}
		return a.Prefix.Addr()
	}
	var out []*Route
	add := func(r *Route) {
		for _, o := range out {
			if sameDerived(o, r) {
				return
			}
		}
		out = append(out, r)
	}
	for _, a := range addrs {
		prim := primaryOf(a)
		addr := a.Prefix.Addr()
		add(&Route{Table: localT, Prefix: netip.PrefixFrom(addr, 32), Type: Local, Proto: ProtoKernel,
			Scope: ScopeHost, Src: prim, NH: &nexthop.Nexthop{Kind: nexthop.Local, Dev: a.Dev}})
		if !up {
			continue
		}
		if a.Prefix.Bits() < 31 {
			add(&Route{Table: localT, Prefix: netip.PrefixFrom(lastAddr(a.Prefix), 32), Type: Broadcast,
				Proto: ProtoKernel, Scope: ScopeLink, Src: prim, NH: &nexthop.Nexthop{Kind: nexthop.Broadcast, Dev: a.Dev}})
		}
		net := a.Prefix.Masked()
		if !a.Secondary && a.Prefix.Bits() < 32 && net.Addr() != netip.IPv4Unspecified() {
			add(&Route{Table: mainT, Prefix: net, Type: Unicast, Proto: ProtoKernel, Scope: ScopeLink,
				Src: addr, NH: &nexthop.Nexthop{Kind: nexthop.Unicast, Dev: a.Dev}})
		}
	}
	return out
}

// sameDerived compares a derived route template with a stored route.
func sameDerived(a, b *Route) bool {
	return a.Owner == b.Owner && a.Table == b.Table && a.Prefix == b.Prefix && a.Type == b.Type && a.Proto == b.Proto &&
		a.Scope == b.Scope && a.Src == b.Src && a.Metric == b.Metric &&
		a.NH != nil && b.NH != nil && a.NH.Group == nil && b.NH.Group == nil &&
		a.NH.Kind == b.NH.Kind && a.NH.Dev == b.NH.Dev && !a.NH.Gateway.IsValid() && !b.NH.Gateway.IsValid()
}

// LastAddr returns the last address of a prefix (its broadcast address).
func LastAddr(p netip.Prefix) netip.Addr { return lastAddr(p) }

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	v := (uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])) | host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// syncDerived applies the difference between the derived routes of dev
// before (addresses `before`, link state as it was) and now.
func (tx *Txn) syncDerived(dev string, before []Address, wasUp bool) error {
	t := tx.devTable(dev)
	return tx.syncDerivedTables(dev, before, wasUp, t, t)
}

// syncDerivedTables is syncDerived across a change of the device's VRF
// table too (vrf.go).
func (tx *Txn) syncDerivedTables(dev string, before []Address, wasUp bool, wasTable, table uint32) error {
	old := derived(before, wasUp, wasTable)
	now := derived(tx.devAddrs(dev), tx.f.nhs.DevUp(dev), table)
	for _, o := range old {
		if !slices.ContainsFunc(now, func(n *Route) bool { return sameDerived(n, o) }) {
			tx.removeDerived(o)
		}
	}
	for _, n := range now {
		if slices.ContainsFunc(old, func(o *Route) bool { return sameDerived(o, n) }) {
			continue
		}
		if err := tx.addDerived(n); err != nil {
			return err
		}
	}
	return nil
}

func (tx *Txn) removeDerived(t *Route) {
	for i, r := range tx.getList(t.Table, t.Prefix) {
		if sameDerived(t, r) {
			tx.removeAt(t.Table, t.Prefix, i)
			return
		}
	}
}

// addDerived stores a derived route unless an identical one exists (the
// kernel's fib_magic appends and ignores EEXIST).
func (tx *Txn) addDerived(t *Route) error {
	for _, r := range tx.getList(t.Table, t.Prefix) {
		if sameDerived(t, r) {
			return nil
		}
	}
	// The kernel's fib_magic validates derived routes like any other and
	// drops them silently when that fails (say a user route makes the
	// preferred source look like a broadcast address).
	if !tx.validPrefsrc(t) {
		return nil
	}
	nh, err := tx.f.nhs.Implicit(nexthop.Spec{Kind: t.NH.Kind, Dev: t.NH.Dev})
	if err != nil {
		return err
	}
	r := *t
	r.NH = nh
	if err := tx.insertRoute(&r, modeAppend); err != nil && !errors.Is(err, ErrExists) {
		return err
	}
	return nil
}

// flushDev removes every configured route whose (non-group) nexthop is an
// implicit nexthop on dev, in all tables: what the kernel does when a device
// loses its last address. Learned routes are their source's to remove.
func (tx *Txn) flushDev(dev string) {
	tx.removeRoutesWhere(func(r *Route) bool {
		return r.Owner == OwnerConfig && r.NH != nil && r.NH.Implicit() && r.NH.Group == nil && r.NH.Dev == dev
	})
}

// routeRef names one stored route for bulk operations.
type routeRef struct {
	table  uint32
	prefix netip.Prefix
}

// prefixesWhere lists the (table, prefix) pairs having a route for which
// pred holds. It walks every table: for rare, bulk operations only.
func (tx *Txn) prefixesWhere(pred func(*Route) bool) []routeRef {
	var refs []routeRef
	for id, t := range tx.next.tables {
		for p, rl := range t.All4() {
			if slices.ContainsFunc(rl.routes, pred) {
				refs = append(refs, routeRef{id, p})
			}
		}
	}
	return refs
}

func (tx *Txn) removeRoutesWhere(pred func(*Route) bool) {
	for _, ref := range tx.prefixesWhere(pred) {
		list := tx.getList(ref.table, ref.prefix)
		var keep []*Route
		for _, r := range list {
			if pred(r) {
				tx.release(r)
			} else {
				keep = append(keep, r)
			}
		}
		tx.setList(ref.table, ref.prefix, keep)
		tx.updateMerged(ref.table, ref.prefix)
	}
}
