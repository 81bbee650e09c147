package fib

// The rule walk of the forwarding path: fib_rules_lookup over the published
// rule list, for one packet's flow key, returning one nexthop pointer.
//
// The seed's fast path is kept: with Linux's default rules only (0 local,
// 32766 main, 32767 default), Lookup is the one merged local+main lookup of
// old, plus table default on a miss. With custom rules each packet walks the
// compiled rule list (selector checks are a few integer compares per rule),
// and where a plain `lookup local` rule is followed by a plain `lookup main`
// rule with no rule between them matching the packet, the two table lookups
// are the one merged lookup again: frames no custom rule selects pay the
// selector checks and nothing else.
//
// The reference (policy_slow.go) walks the Rule list and the per-table route
// lists as configured; tests compare both on random rules and flows.
//
// Locking: the compiled list belongs to one published state; lock-free.

import (
	"net/netip"
	"slices"

	"github.com/netfwd/netfwd/nexthop"
	"github.com/netfwd/netfwd/wire"
)

// Flow is what a rule can select on: the kernel's flowi4 for one packet.
type Flow struct {
	Dst, Src wire.Addr4
	// IIF is the input interface's index (FIB.DevIndex); 1 (lo) for the
	// router's own packets. A packet received on a port of a VRF has the
	// VRF device's index, as Linux's l3mdev receive path gives it. OIF is
	// the output interface asked for (route get oif), 0 for forwarding.
	IIF, OIF uint32
	Mark     uint32
	// L3mdev is the table of the VRF the packet's interface belongs to
	// (0: none): what an l3mdev rule looks up.
	L3mdev       uint32
	SPort, DPort uint16
	TOS, Proto   uint8
}

// ruleSet is a rule list as published: the rules as configured (dumps)
// and their compiled form for the walk.
type ruleSet struct {
	list []Rule
	// custom: the list is not Linux's default one; lookups walk it.
	custom bool
	prog   []ruleInsn
}

// ruleInsn is one compiled rule.
type ruleInsn struct {
	src, srcMask, dst, dstMask uint32
	iif, oif                   uint32
	mark, mask                 uint32
	sportLo, sportSpan         uint16 // port-lo <= span: in range (unset: 0, 65535)
	dportLo, dportSpan         uint16
	tos, proto                 uint8
	l3mdev, invert             bool
	action                     RuleAction
	table                      uint32
	suppress                   int32 // -1: none
	gotoAt                     int32 // index of the goto target, -1 unresolved
	// mergedUntil >= 0 on a plain `lookup local` rule: the index of the
	// next plain `lookup main` rule, whose lookups the merged trie answers
	// together when no rule between them matches.
	mergedUntil int32
}

var defaultRuleSet = newRuleSet(DefaultRules(), nil)

func newRuleSet(list []Rule, devIndex func(string) uint32) *ruleSet {
	rs := &ruleSet{list: list, custom: !slices.Equal(list, DefaultRules())}
	if !rs.custom {
		return rs
	}
	idx := func(name string) uint32 {
		if name == "" {
			return 0
		}
		return devIndex(name)
	}
	rs.prog = make([]ruleInsn, len(list))
	for i := range list {
		r := &list[i]
		in := ruleInsn{
			iif: idx(r.IIF), oif: idx(r.OIF), mark: r.Mark, mask: r.Mask,
			tos: r.TOS & tosRTMask, proto: r.IPProto, l3mdev: r.L3mdev, invert: r.Invert,
			action: r.Action, table: r.Table, suppress: int32(r.SuppressPrefixLen), gotoAt: -1,
			sportLo: 0, sportSpan: 0xffff, dportLo: 0, dportSpan: 0xffff, mergedUntil: -1,
		}
		in.src, in.srcMask = prefixMask(r.Src)
		in.dst, in.dstMask = prefixMask(r.Dst)
		if r.SPort.Set() {
			in.sportLo, in.sportSpan = r.SPort.Lo, r.SPort.Hi-r.SPort.Lo
		}
		if r.DPort.Set() {
			in.dportLo, in.dportSpan = r.DPort.Lo, r.DPort.Hi-r.DPort.Lo
		}
		if r.Action == RuleGoto {
			for j := range list {
				if list[j].Priority == r.Goto {
					in.gotoAt = int32(j)
					break
				}
			}
		}
		rs.prog[i] = in
	}
	// The merged shortcut: a plain local rule, then (past rules that may
	// not match) a plain main rule.
	for i := range list {
		if !plainLookup(&list[i], TableLocal) {
			continue
		}
		for j := i + 1; j < len(list); j++ {
			if plainLookup(&list[j], TableMain) {
				rs.prog[i].mergedUntil = int32(j)
				break
			}
			if plainLookup(&list[j], TableLocal) {
				break
			}
		}
	}
	return rs
}

// plainLookup: `from all lookup TABLE`, nothing else.
func plainLookup(r *Rule, table uint32) bool {
	return r.Action == RuleLookup && r.Table == table && !r.Selectors() && r.SuppressPrefixLen < 0
}

func prefixMask(p netip.Prefix) (addr, mask uint32) {
	if !p.IsValid() || p.Bits() == 0 {
		return 0, 0
	}
	mask = ^uint32(0) << (32 - p.Bits())
	return uint32(wire.Addr4From(p.Addr())) & mask, mask
}

// match is fib_rule_match and fib4_rule_match.
func (r *ruleInsn) match(k *Flow) bool {
	ok := (uint32(k.Src)^r.src)&r.srcMask == 0 && (uint32(k.Dst)^r.dst)&r.dstMask == 0 &&
		(r.iif == 0 || r.iif == k.IIF) && (r.oif == 0 || r.oif == k.OIF) &&
		(k.Mark^r.mark)&r.mask == 0 &&
		(r.tos == 0 || k.TOS&tosRTMask == r.tos) && (r.proto == 0 || r.proto == k.Proto) &&
		k.SPort-r.sportLo <= r.sportSpan && k.DPort-r.dportLo <= r.dportSpan &&
		(!r.l3mdev || k.L3mdev != 0)
	return ok != r.invert
}

// Rule actions' answers: the special nexthops of the route kinds with the
// same ICMP (blackhole: none; prohibit: administratively prohibited). A
// rule's unreachable is -ENETUNREACH, the same answer as no route (nil).
var (
	ruleBlackhole = &nexthop.Nexthop{Kind: nexthop.Blackhole}
	ruleProhibit  = &nexthop.Nexthop{Kind: nexthop.Prohibit}
)

// HasCustomRules reports whether lookups walk a rule list other than
// Linux's default one (then the datapath passes whole flows: LookupFlow).
func (f *FIB) HasCustomRules() bool { return f.cur.Load().rules.custom }

// LookupFlow is Lookup for one packet's flow key: the rule walk when custom
// rules exist, the merged lookup otherwise. Lock-free, no allocation.
func (f *FIB) LookupFlow(k *Flow) *nexthop.Nexthop {
	s := f.cur.Load()
	if !s.rules.custom {
		return f.lookupDefaultRules(s, k.Dst)
	}
	nh, _ := f.walk(s, k)
	return nh
}

// lookupDefaultRules answers for Linux's default rules: local and main
// merged, then table default.
func (f *FIB) lookupDefaultRules(s *state, dst wire.Addr4) *nexthop.Nexthop {
	var nh *nexthop.Nexthop
	if f.compiled != nil {
		nh = f.nhs.ByIndex(f.compiled.c.Load().Lookup(dst))
	} else {
		nh = s.lookup(dst.Netip())
	}
	if nh == nil && s.dflt != nil {
		nh, _ = tableLookup(s.dflt, dst.Netip(), -1)
	}
	return nh
}

// walk is fib_rules_lookup: the answer and the index of the rule that gave
// it (-1: no rule answered, -ENETUNREACH).
func (f *FIB) walk(s *state, k *Flow) (*nexthop.Nexthop, int) {
	prog := s.rules.prog
	dst := k.Dst.Netip()
	for i := 0; i < len(prog); i++ {
		r := &prog[i]
		for r.action == RuleGoto && r.match(k) {
			if r.gotoAt < 0 {
				break
			}
			// Jump: the target is matched like any rule (the kernel's
			// `goto jumped`).
			i = int(r.gotoAt)
			r = &prog[i]
		}
		if !r.match(k) {
			continue
		}
		switch r.action {
		case RuleGoto, RuleNop:
			continue
		case RuleBlackhole:
			return ruleBlackhole, i
		case RuleUnreachable:
			return nil, i
		case RuleProhibit:
			return ruleProhibit, i
		}
		if m := r.mergedUntil; m >= 0 && !matchBetween(prog[i+1:m], k) {
			var nh *nexthop.Nexthop
			if f.compiled != nil {
				nh = f.nhs.ByIndex(f.compiled.c.Load().Lookup(k.Dst))
			} else {
				nh = s.lookup(dst)
			}
			if nh != nil {
				return nh, i
			}
			i = int(m) // local and main both continue the walk
			continue
		}
		id := r.table
		if r.l3mdev {
			id = k.L3mdev
		}
		if nh, ok := tableLookup(s.tables[id], dst, r.suppress); ok {
			return nh, i
		}
	}
	return nil, -1
}

// matchBetween reports whether any rule of prog matches k (a matching nop
// or goto also sends the walk the slow way: conservative, and a goto may
// jump past main).
func matchBetween(prog []ruleInsn, k *Flow) bool {
	for i := range prog {
		if prog[i].match(k) {
			return true
		}
	}
	return false
}

// tableLookup is fib_table_lookup for forwarding: the deciding route of the
// longest prefix holding one. ok is false where the walk goes on: no route,
// a throw, or a result the rule suppresses.
func tableLookup(t *routeTrie, dst netip.Addr, suppress int32) (*nexthop.Nexthop, bool) {
	if t == nil {
		return nil, false
	}
	rl, ok := t.Lookup(dst)
	if !ok {
		return nil, false
	}
	r := rl.routes[0]
	if r.dead() {
		if r = lookupTable(t, dst, lookupFilter{}); r == nil {
			return nil, false
		}
	}
	if r.Type == Throw {
		return nil, false
	}
	if suppress >= 0 && r.Type.hasNexthop() && int32(r.Prefix.Bits()) <= suppress {
		return nil, false
	}
	return r.NH, true
}
