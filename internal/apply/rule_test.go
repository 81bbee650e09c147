package apply

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/internal/show"
)

// ruleTexts is the engine's rule list as `ip rule show` prints it.
func ruleTexts(c *Controller) string {
	var b strings.Builder
	if err := show.Rules(&b, c.Engine().FIB(), config.RuleFilter{}, false); err != nil {
		panic(err)
	}
	return b.String()
}

func TestRuleCommands(t *testing.T) {
	c := applyFresh(t, "r.conf", []string{
		"rule add from 10.1.0.0/16 lookup 100",
		"rule add pref 10 fwmark 1/0xff lookup 101",
		"rule add pref 10 fwmark 1 lookup 101",
		"rule add pref 20 from 10.9.0.0/16 lookup 9 proto static",
		"rule add pref 21 from 10.9.0.0/16 lookup 9",
		"rule add pref 5 goto 21",
	})
	want := "0:\tfrom all lookup local\n5:\tfrom all goto 21\n10:\tfrom all fwmark 0x1/0xff lookup 101\n" +
		"10:\tfrom all fwmark 0x1 lookup 101\n20:\tfrom 10.9.0.0/16 lookup 9 proto static\n21:\tfrom 10.9.0.0/16 lookup 9\n" +
		"32765:\tfrom 10.1.0.0/16 lookup 100\n32766:\tfrom all lookup main\n32767:\tfrom all lookup default\n"
	if got := ruleTexts(c); got != want {
		t.Fatalf("rules:\n%s\nwant:\n%s", got, want)
	}
	steps := func(lines ...string) error { return c.Apply(parseLines(t, "ctl", lines)) }
	// A bare mark compares all bits: it deletes the second pref-10 rule.
	if err := steps("rule del fwmark 1"); err != nil {
		t.Fatal(err)
	}
	// The whole batch or nothing: the second line fails.
	if err := steps("rule del pref 21", "rule del pref 77"); err == nil || !strings.Contains(err.Error(), "ctl:2: No such file or directory") {
		t.Fatalf("batch with a missing rule: %v", err)
	}
	if err := steps("rule add pref 5 goto 21"); err == nil || !strings.Contains(err.Error(), "File exists") {
		t.Fatalf("duplicate: %v", err)
	}
	// The flush takes the static one only; `goto 21` becomes unresolved
	// when 21 goes.
	if err := steps("rule flush from 10.9.0.0/16 protocol static", "rule del pref 21"); err != nil {
		t.Fatal(err)
	}
	want = "0:\tfrom all lookup local\n5:\tfrom all goto 21 [unresolved]\n10:\tfrom all fwmark 0x1/0xff lookup 101\n" +
		"32765:\tfrom 10.1.0.0/16 lookup 100\n32766:\tfrom all lookup main\n32767:\tfrom all lookup default\n"
	if got := ruleTexts(c); got != want {
		t.Fatalf("rules:\n%s\nwant:\n%s", got, want)
	}
	if err := steps("rule flush"); err != nil {
		t.Fatal(err)
	}
	if got := ruleTexts(c); got != "0:\tfrom all lookup local\n" {
		t.Fatalf("after flush:\n%s", got)
	}
	// A query line is not configuration.
	if err := steps("rule show"); err == nil || !strings.Contains(err.Error(), "rule show is a query") {
		t.Fatalf("rule show applied: %v", err)
	}
}

// An exact delete (a reload's inverse) removes the rule equal in every
// field, not the first one the spec's given fields match.
func TestRuleExactDelete(t *testing.T) {
	c := applyFresh(t, "r.conf", []string{"rule add pref 7 fwmark 1 lookup 100", "rule add pref 7 lookup 100"})
	r := fib.Rule{Priority: 7, Table: 100, SuppressPrefixLen: -1}
	del := config.Command{Pos: config.Pos{File: "x", Line: 1}, Rule: &config.RuleCmd{Op: "delete", Spec: fib.RuleSpec{Rule: r}, Exact: true}}
	if err := c.ApplySteps([]Step{{Command: del, Lenient: true}}); err != nil {
		t.Fatal(err)
	}
	if got := ruleTexts(c); !strings.Contains(got, "7:\tfrom all fwmark 0x1 lookup 100\n") || strings.Contains(got, "\n7:\tfrom all lookup") {
		t.Fatalf("exact delete took the wrong rule:\n%s", got)
	}
	// Gone: lenient skips it, strict fails.
	if err := c.ApplySteps([]Step{{Command: del, Lenient: true}}); err != nil {
		t.Fatalf("lenient: %v", err)
	}
	if err := c.ApplySteps([]Step{{Command: del}}); err == nil {
		t.Fatal("strict exact delete of a missing rule passed")
	}
}

// ruleFileLine is one random rule line of a config file (adds with and
// without pref, a few deletes and flushes), over a small space.
func ruleFileLine(r *rand.Rand) string {
	pick := func(opts ...string) string { return opts[r.IntN(len(opts))] }
	switch r.IntN(14) {
	case 0:
		return "rule del " + pick("pref 10", "lookup 100", "from 10.1.0.0/16", "fwmark 1")
	case 1:
		return "rule flush " + pick("", "table 100", "pref 20")
	case 2:
		return "route add 10." + fmt.Sprint(r.IntN(4)) + ".0.0/16 dev eth0 table " + pick("100", "200")
	}
	w := []string{"rule add"}
	if r.IntN(3) > 0 {
		w = append(w, "pref", pick("10", "20", "30", "32000"))
	}
	w = append(w, pick("", "from 10.1.0.0/16", "not to 198.18.0.0/15", "fwmark 1", "iif eth1", "ipproto udp dport 53"))
	w = append(w, pick("lookup 100", "lookup 200", "table main", "blackhole", "goto 30", "nop", "lookup 100 suppress_prefixlength 0"))
	return strings.Join(w, " ")
}

// A reload's diff of rule lines leaves what the new file gives a fresh
// engine (random pairs), and the diff of a file whose rules did not change
// has no rule step.
func TestRuleDiffRandomPairs(t *testing.T) {
	checked := 0
	for seed := range 150 {
		r := rand.New(rand.NewPCG(uint64(seed), 29))
		var a []string
		for range 3 + r.IntN(10) {
			a = append(a, ruleFileLine(r))
		}
		a = makeValid(t, a)
		b := append([]string(nil), a...)
		for range 1 + r.IntN(3) {
			switch i := r.IntN(len(b) + 1); r.IntN(3) {
			case 0:
				if i < len(b) {
					b = slices.Delete(b, i, i+1)
				}
			case 1:
				if j := r.IntN(len(b) + 1); i < len(b) && j < len(b) {
					b[i], b[j] = b[j], b[i]
				}
			default:
				b = slices.Insert(b, i, ruleFileLine(r))
			}
		}
		b = makeValid(t, b)
		if a == nil || b == nil {
			continue
		}
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			checkDiff(t, a, b, false)
			checkDiff(t, a, b, true)
			// The file path (full tables) diffs rule lines alike.
			fa := &File{Name: "a.conf", Text: []byte(fileText(r, a))}
			fb := &File{Name: "b.conf", Text: []byte(fileText(r, b))}
			ac, _ := fa.Commands()
			bc, _ := fb.Commands()
			want, wantSt := Diff(ac, bc, DiffOptions{})
			if fd := DiffFiles(fa, fb, DiffOptions{}); !reflect.DeepEqual(fd.Steps, want) || fd.Stats != wantSt {
				t.Fatalf("DiffFiles differs from Diff\ngot:\n%s\nwant:\n%s", renderSteps(fd.Steps), renderSteps(want))
			}
		})
		checked++
	}
	if checked < 120 {
		t.Fatalf("only %d pairs checked", checked)
	}
}

func TestRuleDiffIsSmall(t *testing.T) {
	a := []string{
		"address add 192.0.2.1/24 dev eth0",
		"rule add from 10.1.0.0/16 lookup 100",
		"rule add pref 10 fwmark 1 lookup 101",
		"rule add pref 20 iif eth0 lookup 102",
		"route add 10.0.0.0/8 via 192.0.2.9",
	}
	diff := func(a, b []string) ([]Step, DiffStats) {
		return Diff(parseLines(t, "a.conf", a), parseLines(t, "b.conf", b), DiffOptions{})
	}
	// No rule changed: no rule step.
	b := append(slices.Clone(a), "route add 10.2.0.0/16 via 192.0.2.9")
	if steps, _ := diff(a, b); len(steps) != 1 || steps[0].Route == nil {
		t.Fatalf("a route added: %v", steps)
	}
	// One rule of priority 20 changed: it alone is undone and re-added.
	b = slices.Clone(a)
	b[3] = "rule add pref 20 iif eth0 lookup 103"
	steps, st := diff(a, b)
	if len(steps) != 2 || st.Removed != 1 || st.Added != 1 || !steps[0].Rule.Exact || steps[0].Rule.Spec.Table != 102 ||
		steps[1].Rule.Op != "add" || steps[1].Rule.Spec.Table != 103 {
		t.Fatalf("changed rule: %+v %+v", steps, st)
	}
	checkDiff(t, a, b, false)
	// A rule without pref is re-added with the priority the file gives it
	// (32765), whatever ctl added meanwhile; ctl's own rules stay.
	live := applyFresh(t, "a.conf", a)
	if err := live.Apply(parseLines(t, "ctl", []string{"rule add pref 100 from 10.1.0.0/16 lookup 100",
		"rule add from 10.7.0.0/16 lookup 7"})); err != nil {
		t.Fatal(err)
	}
	b = slices.Clone(a)
	b[1] = "rule add from 10.1.0.0/16 lookup 200"
	steps, _ = diff(a, b)
	if err := live.ApplySteps(steps); err != nil {
		t.Fatal(err)
	}
	want := "0:\tfrom all lookup local\n9:\tfrom 10.7.0.0/16 lookup 7\n10:\tfrom all fwmark 0x1 lookup 101\n20:\tfrom all iif eth0 lookup 102\n" +
		"100:\tfrom 10.1.0.0/16 lookup 100\n32765:\tfrom 10.1.0.0/16 lookup 200\n" +
		"32766:\tfrom all lookup main\n32767:\tfrom all lookup default\n"
	if got := ruleTexts(live); got != want {
		t.Fatalf("after the reload:\n%s\nwant:\n%s", got, want)
	}
}
