package fib

// The reference rule walk: fib_rules_lookup written out over the Rule list
// as configured and the per-table route lists, with the lookup filters of
// `ip route get` and of gateway validation. Slow and plain; the fast walk
// (policy.go) and the merged trie must agree with it everywhere (tests),
// and `route get`, `ctl trace` and the writer's checks use it.
//
// Locking: reads one state; lock-free on published states.

import "github.com/netfwd/netfwd/nexthop"

// decision is what the walk decided: the route (nil when a rule's action
// decided, or nothing did), the index of the rule that decided (-1: none:
// network unreachable) and its table.
type decision struct {
	route *Route
	rule  int
	table uint32
}

// ruleMatchSlow is fib_rule_match written out over a Rule.
func ruleMatchSlow(r *Rule, k *Flow, devIndex func(string) uint32) bool {
	ok := true
	switch {
	case r.IIF != "" && devIndex(r.IIF) != k.IIF,
		r.OIF != "" && devIndex(r.OIF) != k.OIF,
		r.Mask != 0 && (r.Mark^k.Mark)&r.Mask != 0,
		r.L3mdev && k.L3mdev == 0,
		r.Src.IsValid() && r.Src.Bits() > 0 && !r.Src.Contains(k.Src.Netip()),
		r.Dst.IsValid() && r.Dst.Bits() > 0 && !r.Dst.Contains(k.Dst.Netip()),
		r.TOS&tosRTMask != 0 && r.TOS&tosRTMask != k.TOS&tosRTMask,
		r.IPProto != 0 && r.IPProto != k.Proto,
		r.SPort.Set() && !r.SPort.contains(k.SPort),
		r.DPort.Set() && !r.DPort.contains(k.DPort):
		ok = false
	}
	return ok != r.Invert
}

// walkSlow is fib_lookup with custom rules: each rule in order, a goto
// continuing at its target (which is matched in turn), a throw or a
// suppressed result going on to the next rule.
func walkSlow(rules []Rule, tables map[uint32]*routeTrie, k *Flow, f lookupFilter, devIndex func(string) uint32) decision {
	for i := 0; i < len(rules); i++ {
		r := &rules[i]
		if !ruleMatchSlow(r, k, devIndex) {
			continue
		}
		if r.Action == RuleGoto {
			t := -1
			for j := range rules {
				if rules[j].Priority == r.Goto {
					t = j
					break
				}
			}
			if t >= 0 {
				i = t - 1 // the loop's i++ lands on the target
			}
			continue
		}
		switch r.Action {
		case RuleNop:
			continue
		case RuleBlackhole, RuleUnreachable, RuleProhibit:
			return decision{rule: i}
		}
		id := r.Table
		if r.L3mdev {
			id = k.L3mdev
		}
		rt := lookupTable(tables[id], k.Dst.Netip(), f)
		if rt == nil || rt.Type == Throw {
			continue
		}
		if r.SuppressPrefixLen >= 0 && rt.Type.hasNexthop() && rt.Prefix.Bits() <= r.SuppressPrefixLen {
			continue
		}
		return decision{route: rt, rule: i, table: id}
	}
	return decision{rule: -1}
}

// answer is the decision as the datapath's nexthop (what the fast walk
// returns).
func (d decision) answer(rules []Rule) *nexthop.Nexthop {
	if d.route != nil {
		return d.route.NH
	}
	if d.rule >= 0 {
		switch rules[d.rule].Action {
		case RuleBlackhole:
			return ruleBlackhole
		case RuleProhibit:
			return ruleProhibit
		}
	}
	return nil
}
