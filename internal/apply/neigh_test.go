package apply

import (
	"fmt"
	"strings"
	"testing"

	"github.com/netfwd/netfwd/internal/config"
)

func neighDump(c *Controller) string {
	var b strings.Builder
	e := c.Engine()
	names := map[uint32]string{}
	for _, i := range e.Router().Ifaces() {
		names[i.Index] = i.Name
	}
	for _, i := range e.Router().Neighbours().Dump(e.Domain().Clock().Now()) {
		fmt.Fprintf(&b, "%s dev %s", i.IP, names[i.IfIndex])
		if i.HasLLAddr {
			fmt.Fprintf(&b, " lladdr %s", i.LLAddr)
		}
		fmt.Fprintf(&b, " %s\n", i.State)
	}
	return b.String()
}

func TestNeighLines(t *testing.T) {
	c := newTestController()
	base := []string{
		"address add 10.0.0.1/24 dev eth0",
		"neigh add 10.0.0.2 lladdr 02:00:00:00:00:02 dev eth0",
		"neigh add 10.0.0.3 lladdr 02:00:00:00:00:03 dev eth0 nud stale",
	}
	if err := c.Apply(parseLines(t, "a.conf", base)); err != nil {
		t.Fatal(err)
	}
	want := "10.0.0.2 dev eth0 lladdr 02:00:00:00:00:02 PERMANENT\n10.0.0.3 dev eth0 lladdr 02:00:00:00:00:03 STALE\n"
	if got := neighDump(c); got != want {
		t.Fatalf("got\n%swant\n%s", got, want)
	}
	// All or nothing, every error with its line and the kernel's words.
	err := c.Apply(parseLines(t, "b.conf", []string{
		"neigh del 10.0.0.2 dev eth0",
		"neigh add 10.0.0.3 lladdr 02:00:00:00:00:09 dev eth0",
		"neigh del 10.0.0.7 dev eth0",
		"neigh add 10.0.0.8 dev eth0",
		"neigh add 10.0.0.9 lladdr 02:00:00:00:00:09 dev nosuch",
	}))
	for _, w := range []string{"b.conf:2: file exists", "b.conf:3: no such file or directory",
		"b.conf:4: no link layer address given", `b.conf:5: Cannot find device "nosuch"`} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("want %q in %v", w, err)
		}
	}
	// Syntax is the reader's: refused before anything is applied.
	_, errs := config.Parse("s.conf", strings.NewReader("neigh add 224.0.0.1 lladdr 02:00:00:00:00:09 dev eth0\n"+
		"neigh add 10.0.0.10 lladdr 02:00:00:00:00:0a dev\n"))
	for i, w := range []string{"s.conf:1: invalid neighbour address", `s.conf:2: "dev" needs a value`} {
		if len(errs) != 2 || !strings.Contains(errs[i].Error(), w) {
			t.Errorf("want %q in %v", w, errs)
		}
	}
	if got := neighDump(c); got != want {
		t.Fatalf("a failed batch changed the table:\n%s", got)
	}
	// In one batch: delete then add the same entry is fine.
	if err := c.Apply(parseLines(t, "c.conf", []string{
		"neigh del 10.0.0.2 dev eth0",
		"neigh add 10.0.0.2 lladdr 02:00:00:00:00:22 dev eth0 nud reachable",
	})); err != nil {
		t.Fatal(err)
	}
	// Link down flushes the non-permanent entries only (as carrier loss).
	if err := c.Apply(parseLines(t, "d.conf", []string{"neigh replace 10.0.0.4 lladdr 02:00:00:00:00:04 dev eth0", "link set eth0 down"})); err != nil {
		t.Fatal(err)
	}
	if got := neighDump(c); got != "10.0.0.4 dev eth0 lladdr 02:00:00:00:00:04 PERMANENT\n" {
		t.Fatalf("after link down:\n%s", got)
	}
	// Carrier loss does the same, and the router sees the link down.
	if err := c.Apply(parseLines(t, "e.conf", []string{"link set eth0 up", "neigh add 10.0.0.5 lladdr 02:00:00:00:00:05 dev eth0 nud stale"})); err != nil {
		t.Fatal(err)
	}
	if changed, err := c.SetCarrier("eth0", false); err != nil || !changed {
		t.Fatal(changed, err)
	}
	if c.Engine().Router().Iface("eth0").Up() || c.Engine().FIB().LinkUp("eth0") {
		t.Fatal("eth0 up without carrier")
	}
	if got := neighDump(c); got != "10.0.0.4 dev eth0 lladdr 02:00:00:00:00:04 PERMANENT\n" {
		t.Fatalf("after carrier loss:\n%s", got)
	}
	// Admin up does not bring it back without carrier; carrier does.
	if err := c.Apply(parseLines(t, "f.conf", []string{"link set eth0 up"})); err != nil {
		t.Fatal(err)
	}
	if c.Engine().Router().Iface("eth0").Up() {
		t.Fatal("eth0 up without carrier after admin up")
	}
	c.SetCarrier("eth0", true)
	if !c.Engine().Router().Iface("eth0").Up() || !c.Engine().FIB().LinkUp("eth0") {
		t.Fatal("eth0 down with carrier")
	}
	// A MAC change drops every entry (they carry the old address).
	if err := c.Apply(parseLines(t, "g.conf", []string{"link set eth0 address 02:aa:00:00:00:01"})); err != nil {
		t.Fatal(err)
	}
	if got := neighDump(c); got != "" {
		t.Fatalf("after MAC change:\n%s", got)
	}
}
