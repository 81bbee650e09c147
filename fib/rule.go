package fib

// Policy routing rules (`ip rule`): the ordered list the kernel's
// fib_rules_lookup walks, with Linux's defaults (0: lookup local, 32766:
// lookup main, 32767: lookup default) and its add/delete semantics
// (fib_nl_newrule, rule_exists, rule_find): the default priority is the
// second rule's minus one, equal priorities keep insertion order, a goto
// must jump forward and may name a priority nobody has yet (unresolved), a
// delete removes the first rule that matches every attribute given.
//
// The walk itself is in policy.go (fast) and policy_slow.go (reference).
//
// Locking: the rule list is part of the published state (immutable); Txn
// methods run under the FIB writer lock.

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
)

// RuleAction is what a matching rule does (FR_ACT_*).
type RuleAction uint8

const (
	// RuleLookup looks the destination up in Table (FR_ACT_TO_TBL).
	RuleLookup RuleAction = iota
	// RuleGoto continues the walk at the first rule of priority Goto.
	RuleGoto
	// RuleNop does nothing (the walk goes on).
	RuleNop
	// RuleBlackhole drops silently (-EINVAL).
	RuleBlackhole
	// RuleUnreachable answers "network unreachable" (-ENETUNREACH).
	RuleUnreachable
	// RuleProhibit answers "administratively prohibited" (-EACCES).
	RuleProhibit
)

var ruleActionNames = [...]string{"lookup", "goto", "nop", "blackhole", "unreachable", "prohibit"}

func (a RuleAction) String() string {
	if int(a) < len(ruleActionNames) {
		return ruleActionNames[a]
	}
	return fmt.Sprintf("action(%d)", a)
}

// PortRange is a rule's sport or dport selector; the zero value is "any".
type PortRange struct{ Lo, Hi uint16 }

// Set reports whether the range selects anything (fib_rule_port_range_set).
func (p PortRange) Set() bool { return p.Lo != 0 || p.Hi != 0 }

func (p PortRange) contains(port uint16) bool { return port >= p.Lo && port <= p.Hi }

// Rule is one policy routing rule as configured.
type Rule struct {
	Priority uint32
	// Invert is `not`: the rule applies where its selectors do not match.
	Invert bool
	// Src and Dst select by address; the zero Prefix is "all".
	Src, Dst netip.Prefix
	// IIF and OIF select by interface name ("": any). iif lo selects the
	// router's own packets (output lookups).
	IIF, OIF string
	// Mark and Mask select by fwmark: (mark ^ Mark) & Mask == 0. Mask 0
	// means no fwmark selector.
	Mark, Mask uint32
	// TOS selects by the TOS field (the kernel compares the bits of
	// IPTOS_RT_MASK, 0x1c); 0: any.
	TOS uint8
	// IPProto selects by IP protocol (0: any); SPort and DPort by the
	// transport ports.
	IPProto      uint8
	SPort, DPort PortRange
	// L3mdev: look up the table of the VRF the packet's interface belongs
	// to; matches only packets of a VRF (`ip rule add l3mdev`).
	L3mdev bool

	Action RuleAction
	Table  uint32 // RuleLookup (0 with L3mdev)
	Goto   uint32 // RuleGoto: the target priority
	// SuppressPrefixLen: a lookup result whose prefix is this long or
	// shorter is ignored and the walk goes on; -1: none.
	SuppressPrefixLen int
	// Proto is who installed the rule (kernel for the defaults).
	Proto Proto
}

// Selectors reports whether the rule selects anything (false: "from all"
// with no other selector).
func (r *Rule) Selectors() bool {
	return r.Src.IsValid() && r.Src.Bits() > 0 || r.Dst.IsValid() && r.Dst.Bits() > 0 ||
		r.IIF != "" || r.OIF != "" || r.Mask != 0 || r.TOS&tosRTMask != 0 || r.IPProto != 0 ||
		r.SPort.Set() || r.DPort.Set() || r.L3mdev || r.Invert
}

// tosRTMask is IPTOS_RT_MASK: the TOS bits a rule compares.
const tosRTMask = 0x1c

// RuleL3mdevPriority is the priority of the rule Linux adds with the first
// VRF device (`1000: from all lookup [l3mdev-table]`).
const RuleL3mdevPriority = 1000

// DefaultRules returns Linux's rule list of a new namespace.
func DefaultRules() []Rule {
	return []Rule{
		{Priority: 0, Table: TableLocal, SuppressPrefixLen: -1, Proto: ProtoKernel},
		{Priority: 32766, Table: TableMain, SuppressPrefixLen: -1, Proto: ProtoKernel},
		{Priority: 32767, Table: TableDefault, SuppressPrefixLen: -1, Proto: ProtoKernel},
	}
}

// RuleSpec is a rule as given to `rule add` or `rule del`. On add, unset
// fields take iproute2's defaults (priority from the kernel, action lookup
// main); on del, only the fields set must match.
type RuleSpec struct {
	Rule
	PrioritySet bool
	ActionSet   bool // del: match Action (add: Action is used as is)
	TableSet    bool
	MarkSet     bool // fwmark given (Mark may be 0)
	MaskSet     bool
}

// Errors of rule changes, with the kernel's errno wording.
var (
	ErrRuleExists   = errors.New("File exists")
	ErrRuleNotFound = errors.New("No such file or directory")
)

// Rules returns the published rule list, in walk order.
func (f *FIB) Rules() []Rule { return slices.Clone(f.cur.Load().rules.list) }

// Rules returns the transaction's rule list, in walk order.
func (tx *Txn) Rules() []Rule { return slices.Clone(tx.next.rules.list) }

// RuleUnresolved reports whether a goto rule's target priority has no rule.
func RuleUnresolved(rules []Rule, r *Rule) bool {
	if r.Action != RuleGoto {
		return false
	}
	for i := range rules {
		if rules[i].Priority == r.Goto {
			return false
		}
	}
	return true
}

// AddRule adds a rule as `ip rule add` does.
func (tx *Txn) AddRule(spec RuleSpec) error {
	r := spec.Rule
	rules := tx.next.rules.list
	if !spec.ActionSet {
		r.Action = RuleLookup
	}
	if r.Action == RuleLookup && !spec.TableSet && !r.L3mdev {
		r.Table = TableMain
	}
	if !spec.PrioritySet {
		r.Priority = defaultRulePriority(rules)
	}
	if !spec.MarkSet && !spec.MaskSet {
		r.Mark, r.Mask = 0, 0
	} else if !spec.MaskSet {
		r.Mask = 0
		if r.Mark != 0 {
			r.Mask = 0xffffffff // the kernel's compatibility default
		}
	}
	if err := checkRule(&r); err != nil {
		return err
	}
	for i := range rules {
		if ruleExists(&rules[i], &r) {
			return ErrRuleExists
		}
	}
	at := len(rules)
	for i := range rules {
		if rules[i].Priority > r.Priority {
			at = i
			break
		}
	}
	tx.setRules(slices.Insert(slices.Clone(rules), at, r))
	return nil
}

// checkRule is the kernel's validation of a new rule (fib_nl2rule,
// fib4_rule_configure).
func checkRule(r *Rule) error {
	switch {
	case r.Action == RuleGoto && r.Goto <= r.Priority:
		return errors.New("Backward goto not supported")
	case r.Action != RuleGoto && r.Goto != 0:
		return errors.New("Unexpected goto")
	case r.L3mdev && r.Table != 0:
		return errors.New("l3mdev and table are mutually exclusive")
	case r.L3mdev && r.Action != RuleLookup:
		return errors.New("l3mdev rules need a lookup action")
	case r.Action == RuleLookup && r.Table == 0 && !r.L3mdev:
		return errors.New("Invalid table")
	case !r.SPort.valid():
		return errors.New("Invalid sport range")
	case !r.DPort.valid():
		return errors.New("Invalid dport range")
	case r.Src.IsValid() && !r.Src.Addr().Is4() || r.Dst.IsValid() && !r.Dst.Addr().Is4():
		return errors.New("Invalid address family")
	case r.TOS&3 != 0:
		return errors.New("Invalid dsfield (tos): ECN bits must be 0")
	case r.TOS&^tosRTMask != 0:
		return errors.New("Invalid tos")
	}
	// Src and Dst keep their host bits, as the kernel keeps them: they
	// tell rules apart (rule_exists, rule_find) though they match alike.
	return nil
}

// valid is fib_rule_port_range_valid for a range that is set: ports 1 to
// 65534, low to high.
func (p PortRange) valid() bool {
	return !p.Set() || p.Lo != 0 && p.Hi != 0 && p.Hi < 0xffff && p.Lo <= p.Hi
}

// defaultRulePriority is fib_default_rule_pref: one less than the second
// rule's priority, when there is one and it is not 0.
func defaultRulePriority(rules []Rule) uint32 {
	if len(rules) >= 2 && rules[1].Priority > 0 {
		return rules[1].Priority - 1
	}
	return 0
}

// ruleExists is the kernel's rule_exists (the check behind NLM_F_EXCL):
// every attribute equal, the protocol too (`ip rule add pref 0 lookup
// local` adds a second local rule beside the kernel's), except that the
// addresses are compared only where the new rule has them, and `not` and a
// goto's target are not compared at all (`pref 7 goto 200` exists where
// `pref 7 goto 100` does).
func ruleExists(o, n *Rule) bool {
	if o.Action != n.Action || o.Table != n.Table || o.Priority != n.Priority ||
		o.IIF != n.IIF || o.OIF != n.OIF || o.Mark != n.Mark || o.Mask != n.Mask ||
		o.SuppressPrefixLen != n.SuppressPrefixLen || o.L3mdev != n.L3mdev ||
		o.IPProto != n.IPProto || o.SPort != n.SPort || o.DPort != n.DPort || o.Proto != n.Proto {
		return false
	}
	return compareAddrs(o, &n.Src, &n.Dst, n.TOS)
}

// compareAddrs is fib4_rule_compare: the selectors given (non-zero
// length, non-zero tos) must be equal.
func compareAddrs(o *Rule, src, dst *netip.Prefix, tos uint8) bool {
	if src.IsValid() && src.Bits() > 0 && o.Src != *src {
		return false
	}
	if dst.IsValid() && dst.Bits() > 0 && o.Dst != *dst {
		return false
	}
	return tos == 0 || o.TOS == tos
}

// DelRule deletes the first rule matching every attribute the spec sets
// (rule_find), as `ip rule del` does.
func (tx *Txn) DelRule(spec RuleSpec) error {
	// fib_nl2rule checks a delete's goto (against priority 0 when none is
	// given) and ports as it checks an add's.
	prio := uint32(0)
	if spec.PrioritySet {
		prio = spec.Priority
	}
	switch {
	case spec.ActionSet && spec.Action == RuleGoto && spec.Goto <= prio:
		return errors.New("Backward goto not supported")
	case !spec.SPort.valid():
		return errors.New("Invalid sport range")
	case !spec.DPort.valid():
		return errors.New("Invalid dport range")
	}
	rules := tx.next.rules.list
	for i := range rules {
		if ruleMatchesSpec(&rules[i], &spec) {
			tx.setRules(slices.Delete(slices.Clone(rules), i, i+1))
			return nil
		}
	}
	return ErrRuleNotFound
}

func ruleMatchesSpec(o *Rule, s *RuleSpec) bool {
	switch {
	case s.ActionSet && o.Action != s.Action,
		s.TableSet && s.Table != 0 && o.Table != s.Table,
		s.PrioritySet && o.Priority != s.Priority,
		s.IIF != "" && o.IIF != s.IIF,
		s.OIF != "" && o.OIF != s.OIF,
		s.MarkSet && s.Mark != 0 && o.Mark != s.Mark,
		s.MaskSet && s.Mask != 0 && o.Mask != s.Mask,
		s.SuppressPrefixLen != -1 && o.SuppressPrefixLen != s.SuppressPrefixLen,
		s.L3mdev && !o.L3mdev,
		s.IPProto != 0 && o.IPProto != s.IPProto,
		s.Proto != 0 && o.Proto != s.Proto,
		s.SPort.Set() && o.SPort != s.SPort,
		s.DPort.Set() && o.DPort != s.DPort:
		return false
	}
	return compareAddrs(o, &s.Src, &s.Dst, s.TOS)
}

// FlushRules deletes every rule but those of priority 0, as `ip rule
// flush` does.
func (tx *Txn) FlushRules() {
	var keep []Rule
	for _, r := range tx.next.rules.list {
		if r.Priority == 0 {
			keep = append(keep, r)
		}
	}
	tx.setRules(keep)
}

// SetRules replaces the whole rule list (a reload, a handover): rules must
// be in walk order and each valid.
func (tx *Txn) SetRules(rules []Rule) error {
	for i := range rules {
		r := rules[i]
		if err := checkRule(&r); err != nil {
			return fmt.Errorf("rule %d: %w", r.Priority, err)
		}
		if i > 0 && rules[i-1].Priority > r.Priority {
			return fmt.Errorf("rule %d: out of order", r.Priority)
		}
	}
	tx.setRules(slices.Clone(rules))
	return nil
}

func (tx *Txn) setRules(list []Rule) {
	tx.next.rules = newRuleSet(list, tx.f.DevIndex)
}
