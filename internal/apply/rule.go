package apply

// Rule lines (`rule add|delete|flush`) applied to a FIB transaction: add
// and delete are the FIB's own (fib.Txn.AddRule, DelRule: the kernel's
// rule_exists and rule_find); a flush deletes what iproute2's `ip rule
// flush SELECTOR` deletes: it lists the rules, then sends a delete with all
// attributes of each one the selector takes, priority 0 excepted. An
// exact delete (a reload's inverse of a file's rule) removes the first
// rule equal in every field; a reset (a reload's, diff_rule.go) puts back
// Linux's default rule list.
//
// Locking: runs inside the caller's FIB transaction (one writer).

import (
	"fmt"
	"slices"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/config"
)

func ruleCommand(tx *fib.Txn, c *config.RuleCmd) error {
	switch c.Op {
	case "add":
		return tx.AddRule(c.Spec)
	case "delete":
		if c.Exact {
			rules := tx.Rules()
			i := slices.Index(rules, c.Spec.Rule)
			if i < 0 {
				return fib.ErrRuleNotFound
			}
			return tx.SetRules(slices.Delete(rules, i, i+1))
		}
		return tx.DelRule(c.Spec)
	case "flush":
		if c.Filter == (config.RuleFilter{}) {
			tx.FlushRules()
			return nil
		}
		for _, r := range tx.Rules() {
			if r.Priority == 0 || !c.Filter.FlushSelects(&r) {
				continue
			}
			// Gone already when an earlier delete took it for an equal one.
			_ = tx.DelRule(RuleSpecOf(r))
		}
		return nil
	case "reset":
		return tx.SetRules(fib.DefaultRules())
	}
	return fmt.Errorf("rule %s: unknown operation", c.Op)
}

// RuleSpecOf is the spec that names r with every attribute, as a dump of
// r sent back as a delete does.
func RuleSpecOf(r fib.Rule) fib.RuleSpec {
	return fib.RuleSpec{Rule: r, PrioritySet: true, ActionSet: true, TableSet: r.Table != 0,
		MarkSet: r.Mark != 0 || r.Mask != 0, MaskSet: r.Mark != 0 || r.Mask != 0}
}
