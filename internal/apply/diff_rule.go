package apply

// Reload diffs of rule lines (`rule add|delete|flush`). A rule's effect
// depends on the rule list it meets: an add without `pref` takes the
// second rule's priority minus one, rules of equal priority keep their
// insertion order, a delete removes the first rule that matches. So each
// file's rule lines are replayed in order on a scratch FIB (ruleSim), and
// an add line is represented by the rule it gave there, its priority
// explicit: that is its canonical form (two files' adds match when they
// give the same rule), the command that re-does it (the same rule whatever
// rules ctl added meanwhile: a reload gives what the file gives a fresh
// daemon) and its inverse (an exact delete of that rule, not the first
// rule that happens to match the line's selectors: a ctl rule that does
// is left alone).
//
// Keys (diff.go): an add owns rule:P, its priority, so a change re-does
// the rules of that priority (their order among themselves matters) and
// leaves the others alone. A delete or flush line, or an add the scratch
// FIB refused, owns rule:*, on which every rule line depends; in files with
// such lines every rule line owns rule:* as well (a flush's effect depends
// on every rule before it), so any rule change there re-does all rule
// lines of both files, and since what a flush or delete removed (Linux's
// default rules among them) has no inverse, the old file's rules are not
// undone one by one: the rule list is reset to Linux's default one and the
// new file's rule lines run on it. Rules ctl added go with them then, as
// the new file's flush would take them.
//
// Locking: none; a normaliser belongs to one diff.

import (
	"fmt"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/config"
)

// ruleSim is one file's rule lines replayed on a scratch FIB.
type ruleSim struct {
	f        *fib.FIB
	resolved map[uint32]fib.Rule // per add line (its ref): the rule it added
	edits    bool                // a delete or flush line, or an add that failed
	recs     []int               // the file's rule records (indexes)
}

func newRuleSim() *ruleSim {
	return &ruleSim{f: fib.New(fib.Options{}), resolved: map[uint32]fib.Rule{}}
}

// run applies one rule line to the scratch FIB, recording what an add
// added.
func (s *ruleSim) run(ref uint32, c *config.RuleCmd) {
	tx := s.f.Begin(1)
	before := tx.Rules()
	if err := ruleCommand(tx, c); err != nil {
		tx.Abort()
		s.edits = true
		return
	}
	if c.Op == "add" {
		after := tx.Rules()
		for i := range after {
			if i >= len(before) || after[i] != before[i] {
				s.resolved[ref] = after[i]
				break
			}
		}
	} else {
		s.edits = true
	}
	tx.Commit()
}

// ruleRecord replays a rule line of the file being read (side) and
// returns its record.
func (n *normaliser) ruleRecord(side int, ref uint32, c *config.Command, at int) rec {
	if n.rules[side] == nil {
		n.rules[side] = newRuleSim()
	}
	sim := n.rules[side]
	sim.run(ref, c.Rule)
	sim.recs = append(sim.recs, at)
	lg := n.ruleLogical(side, ref, c)
	return rec{sum: n.textSum(lg.text), ref: ref, set: n.set(lg.own, lg.deps, nil)}
}

var ruleAllKey = key{kind: keyRuleAll}

// ruleLogical is a rule line's logical command (after ruleRecord ran).
func (n *normaliser) ruleLogical(side int, ref uint32, c *config.Command) logical {
	rc := c.Rule
	if r, ok := n.rules[side].resolved[ref]; ok {
		return logical{
			text: fmt.Sprintf("rule add %+v", r),
			fwd:  with(c, func(x *config.Command) { x.Rule = &config.RuleCmd{Op: "add", Spec: RuleSpecOf(r)} }),
			inverse: []config.Command{with(c, func(x *config.Command) {
				x.Rule = &config.RuleCmd{Op: "delete", Spec: fib.RuleSpec{Rule: r}, Exact: true}
			})},
			own:  []key{{kind: keyRule, a: r.Priority}},
			deps: []key{ruleAllKey},
		}
	}
	return logical{text: fmt.Sprintf("rule %s %+v %+v", rc.Op, rc.Spec, rc.Filter), fwd: *c,
		own: []key{ruleAllKey}, deps: []key{ruleAllKey}}
}

// settleRules: where either file deletes or flushes rules, every rule line
// owns rule:* (see the file comment).
func (n *normaliser) settleRules(a, b []rec) {
	if (n.rules[0] == nil || !n.rules[0].edits) && (n.rules[1] == nil || !n.rules[1].edits) {
		return
	}
	for side, recs := range [][]rec{a, b} {
		if n.rules[side] == nil {
			continue
		}
		for _, i := range n.rules[side].recs {
			s := n.sets[recs[i].set]
			recs[i].set = n.set(append(clone(s.own), ruleAllKey), s.deps, s.pulls)
		}
	}
}

// ruleReset: where a file deletes or flushes rules and the rule lines are
// re-done, the step that resets the rule list (instead of the old file's
// rule inverses, which skipA lists).
func (n *normaliser) ruleReset(aRedo, bRedo []bool) (reset *Step, skipA map[int]bool) {
	if (n.rules[0] == nil || !n.rules[0].edits) && (n.rules[1] == nil || !n.rules[1].edits) {
		return nil, nil
	}
	redone := false
	for side, redo := range [][]bool{aRedo, bRedo} {
		if n.rules[side] == nil {
			continue
		}
		for _, i := range n.rules[side].recs {
			redone = redone || redo[i]
		}
	}
	if !redone {
		return nil, nil
	}
	skipA = map[int]bool{}
	if n.rules[0] != nil {
		for _, i := range n.rules[0].recs {
			skipA[i] = true
		}
	}
	c := config.Command{Pos: config.Pos{File: "reload", Line: 0}, Text: "rule reset (the file deletes or flushes rules)",
		Rule: &config.RuleCmd{Op: "reset"}}
	return &Step{Command: c, Lenient: true}, skipA
}
