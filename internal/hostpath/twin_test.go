package hostpath

// Twins in real network namespaces (root; skipped without, failed under
// NETFWD_E2E=1): life cycle, carrier, leftovers, refused names, kill -9,
// addresses.

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/testenv"
)

func macString(m [6]byte) string { return net.HardwareAddr(m[:]).String() }

// checkTwin fails unless ns has a non-persistent TAP name with mac and mtu,
// up.
func checkTwin(t *testing.T, ns, name string, mac [6]byte, mtu int) ipLink {
	t.Helper()
	l, ok := showLink(t, ns, name)
	switch {
	case !ok:
		t.Fatalf("twin %s missing", name)
	case l.Linkinfo.Kind != "tun" || l.Linkinfo.Data.Type != "tap" || l.Linkinfo.Data.Persist:
		t.Fatalf("%s: linkinfo %+v, want a non-persistent tap", name, l.Linkinfo)
	case l.Address != macString(mac) || l.MTU != mtu || !l.has("UP"):
		t.Fatalf("%s: address %s mtu %d flags %v, want %s mtu %d UP", name, l.Address, l.MTU, l.Flags, macString(mac), mtu)
	}
	return l
}

func TestTwinLifeCycle(t *testing.T) {
	tm := newTestManager(t, Options{})
	long := "averyverylongportname"
	specs := []Spec{
		{Port: "eth1", MAC: testMAC, MTU: 9000},
		{Port: long, MAC: peerMAC},
		{Port: "vlan10", Name: "svi10", MAC: testMAC},
	}
	tm.sync(t, specs...)
	l1 := checkTwin(t, tm.ns, "nf-eth1", testMAC, 9000)
	ll := checkTwin(t, tm.ns, DefaultName(long), peerMAC, 1500)
	checkTwin(t, tm.ns, "svi10", testMAC, 1500)
	if tw := tm.Twin("eth1"); tw == nil || tw.Name() != "nf-eth1" || tw.Ifindex() != l1.Ifindex || tw.Port() != "eth1" {
		t.Fatalf("Twin(eth1) = %+v", tw)
	}
	if n := len(tm.Twins()); n != 3 {
		t.Fatalf("%d twins, want 3", n)
	}
	if tm.Twin("eth9") != nil {
		t.Fatal("a twin for a port never synced")
	}

	// Idempotent: nothing is re-created.
	tm.sync(t, specs...)
	if l, _ := showLink(t, tm.ns, "nf-eth1"); l.Ifindex != l1.Ifindex {
		t.Fatal("a second Sync of the same specs re-created a twin")
	}

	// MAC and MTU change in place; what the kernel was told behind our
	// back (MTU, down) is put right.
	testenv.Run(t, "ip", "-n", tm.ns, "link", "set", DefaultName(long), "mtu", "1400", "down")
	eth1 := tm.Twin("eth1")
	specs[0].MAC, specs[0].MTU = peerMAC, 1500
	tm.sync(t, specs...)
	if l := checkTwin(t, tm.ns, "nf-eth1", peerMAC, 1500); l.Ifindex != l1.Ifindex {
		t.Fatal("a MAC/MTU change re-created the twin")
	}
	if l := checkTwin(t, tm.ns, DefaultName(long), peerMAC, 1500); l.Ifindex != ll.Ifindex {
		t.Fatal("repairing the MTU re-created the twin")
	}

	// Renamed: the old name goes, the Twin object stays.
	specs[0].Name = "host-eth1"
	tm.sync(t, specs...)
	checkTwin(t, tm.ns, "host-eth1", peerMAC, 1500)
	waitGone(t, tm.ns, "nf-eth1")
	if tm.Twin("eth1") != eth1 || eth1.Name() != "host-eth1" {
		t.Fatal("renaming replaced the Twin object")
	}

	// Deleted behind our back: re-created.
	testenv.Run(t, "ip", "-n", tm.ns, "link", "del", "svi10")
	tm.sync(t, specs...)
	checkTwin(t, tm.ns, "svi10", testMAC, 1500)

	// Removed from the list: gone; a kept Twin drops its punts.
	tm.sync(t, specs[0], specs[2])
	waitGone(t, tm.ns, DefaultName(long))
	if tm.Twin(long) != nil {
		t.Fatal("removed twin still listed")
	}

	// Close removes everything.
	tm.Close()
	waitGone(t, tm.ns, "host-eth1")
	waitGone(t, tm.ns, "svi10")
	if eth1.Punt(udpFrame(t, testMAC, peerMAC, 0, peerIP, routerIP, 1, 2, nil)) || eth1.Stats().PuntDrops == 0 {
		t.Fatal("a punt into a closed twin was not dropped and counted")
	}
	if err := tm.Sync(specs); !errors.Is(err, ErrClosed) {
		t.Fatalf("Sync after Close: %v", err)
	}
}

func TestTwinSpecErrors(t *testing.T) {
	tm := newTestManager(t, Options{})
	tm.sync(t, Spec{Port: "eth1", MAC: testMAC})
	err := tm.Sync([]Spec{
		{Port: "eth1", MAC: [6]byte{1, 2, 3, 4, 5, 6}}, // multicast MAC: eth1 stays as it is
		{Port: "eth2", MAC: testMAC, MTU: 10},
		{Port: "eth3", Name: "bad/name", MAC: testMAC},
		{Port: "eth4", Name: "same", MAC: testMAC},
		{Port: "eth5", Name: "same", MAC: testMAC},
		{Port: "eth6", MAC: testMAC, Addrs: []netip.Prefix{netip.MustParsePrefix("2001:db8::1/64")}},
		{Port: "eth7", MAC: testMAC, Limits: Limits{ClassOther: {Rate: 10}}},
		{Port: "eth8", MAC: testMAC},
	})
	var se *SyncError
	if !errors.As(err, &se) {
		t.Fatalf("Sync: %v, want a *SyncError", err)
	}
	failed := map[string]string{}
	for _, e := range se.Twins {
		failed[e.Port] = e.Error()
	}
	for _, port := range []string{"eth1", "eth2", "eth3", "eth5", "eth6", "eth7"} {
		if failed[port] == "" {
			t.Errorf("no error for %s", port)
		}
	}
	if len(failed) != 6 {
		t.Errorf("errors for %v, want 6 ports", failed)
	}
	checkTwin(t, tm.ns, "nf-eth1", testMAC, 1500) // untouched
	checkTwin(t, tm.ns, "same", testMAC, 1500)    // the first one
	checkTwin(t, tm.ns, "nf-eth8", testMAC, 1500) // the good one
	t.Log(err)
}

func TestTwinCarrier(t *testing.T) {
	tm := newTestManager(t, Options{})
	tm.sync(t, Spec{Port: "eth1", MAC: testMAC})
	tw := tm.Twin("eth1")
	if l, _ := showLink(t, tm.ns, "nf-eth1"); !l.has("LOWER_UP") {
		t.Fatalf("new twin flags %v: want carrier", l.Flags)
	}
	if err := tw.SetCarrier(false); err != nil {
		t.Fatal(err)
	}
	if l, _ := showLink(t, tm.ns, "nf-eth1"); !l.has("NO-CARRIER") || l.has("LOWER_UP") {
		t.Fatalf("after SetCarrier(false): flags %v", l.Flags)
	}
	// A re-created device keeps the carrier setting.
	testenv.Run(t, "ip", "-n", tm.ns, "link", "del", "nf-eth1")
	tm.sync(t, Spec{Port: "eth1", MAC: testMAC})
	if l, _ := showLink(t, tm.ns, "nf-eth1"); !l.has("NO-CARRIER") {
		t.Fatalf("re-created twin lost the carrier setting: flags %v", l.Flags)
	}
	if err := tw.SetCarrier(true); err != nil {
		t.Fatal(err)
	}
	if l, _ := showLink(t, tm.ns, "nf-eth1"); !l.has("LOWER_UP") || l.has("NO-CARRIER") {
		t.Fatalf("after SetCarrier(true): flags %v", l.Flags)
	}
}

func TestTwinReplacesLeftover(t *testing.T) {
	tm := newTestManager(t, Options{})
	testenv.Run(t, "ip", "-n", tm.ns, "tuntap", "add", "dev", "nf-eth1", "mode", "tap")
	old, _ := showLink(t, tm.ns, "nf-eth1")
	if !old.Linkinfo.Data.Persist {
		t.Fatal("ip tuntap add made no persistent TAP")
	}
	tm.sync(t, Spec{Port: "eth1", MAC: testMAC})
	l := checkTwin(t, tm.ns, "nf-eth1", testMAC, 1500)
	if l.Ifindex == old.Ifindex {
		t.Fatal("the leftover was not replaced")
	}
	tm.Close()
	waitGone(t, tm.ns, "nf-eth1")
}

func TestTwinRefusesNames(t *testing.T) {
	tm := newTestManager(t, Options{})
	testenv.Run(t, "ip", "-n", tm.ns, "link", "add", "nf-eth1", "type", "veth", "peer", "name", "nf-eth2")
	err := tm.Sync([]Spec{{Port: "eth1", MAC: testMAC}})
	if err == nil || !strings.Contains(err.Error(), "not a TAP") {
		t.Fatalf("Sync over a veth: %v", err)
	}
	if l, ok := showLink(t, tm.ns, "nf-eth1"); !ok || l.Linkinfo.Kind != "veth" {
		t.Fatal("the veth was touched")
	}

	// A TAP a live process holds: refused, naming the process.
	child := startChild(t, tm.ns, "held0")
	err = tm.Sync([]Spec{{Port: "eth3", Name: "held0", MAC: testMAC}})
	if err == nil || !strings.Contains(err.Error(), strconv.Itoa(child.Process.Pid)) || !strings.Contains(err.Error(), "running") {
		t.Fatalf("Sync over a TAP held by process %d: %v", child.Process.Pid, err)
	}
	// Another Manager of this process counts as a live holder too.
	tm.sync(t, Spec{Port: "eth4", MAC: testMAC})
	other, err := New(Options{Netns: tm.ns, Inject: func(*Twin, []byte) bool { return true }})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.Sync([]Spec{{Port: "eth4", MAC: testMAC}}); err == nil || !strings.Contains(err.Error(), fmt.Sprint(syscall.Getpid())) {
		t.Fatalf("second manager over our own twin: %v", err)
	}
}

// TestTwinGoneAfterKill9: a process that owned twins is killed with kill
// -9: the kernel closes its files and the twins vanish; the next owner can
// take the name (when the kill is still in progress it waits for it).
func TestTwinGoneAfterKill9(t *testing.T) {
	tm := newTestManager(t, Options{})
	child := startChild(t, tm.ns, "nf-eth1")
	checkTwin(t, tm.ns, "nf-eth1", testMAC, 1500)
	child.Process.Signal(syscall.SIGKILL)
	child.Wait()
	waitGone(t, tm.ns, "nf-eth1")

	// Killed while we start: the name is free, or held by an exiting
	// process that Sync waits for.
	child = startChild(t, tm.ns, "nf-eth1")
	child.Process.Signal(syscall.SIGKILL)
	tm.sync(t, Spec{Port: "eth1", MAC: testMAC})
	checkTwin(t, tm.ns, "nf-eth1", testMAC, 1500)
}

func TestTwinAddrs(t *testing.T) {
	tm := newTestManager(t, Options{})
	p := netip.MustParsePrefix
	steps := []struct {
		addrs []netip.Prefix
		want  []ipAddr
	}{
		{[]netip.Prefix{p("10.0.0.1/24"), p("10.0.0.5/24"), p("192.0.2.1/32"), p("198.18.0.1/30")}, []ipAddr{
			{"10.0.0.1", 24, "10.0.0.255", false},
			{"10.0.0.5", 24, "10.0.0.255", true},
			{"192.0.2.1", 32, "", false},
			{"198.18.0.1", 30, "198.18.0.3", false},
		}},
		// The primary goes: its secondary becomes the primary, a new one
		// is added, 198.18.0.1/30 changes length.
		{[]netip.Prefix{p("10.0.0.5/24"), p("10.0.0.7/24"), p("192.0.2.1/32"), p("198.18.0.1/31"), p("203.0.113.9/24")}, []ipAddr{
			{"10.0.0.5", 24, "10.0.0.255", false},
			{"10.0.0.7", 24, "10.0.0.255", true},
			{"192.0.2.1", 32, "", false},
			{"198.18.0.1", 31, "", false},
			{"203.0.113.9", 24, "203.0.113.255", false},
		}},
		{nil, nil},
	}
	for i, st := range steps {
		tm.sync(t, Spec{Port: "eth1", MAC: testMAC, Addrs: st.addrs})
		got := showAddrs(t, tm.ns, "nf-eth1")
		want := map[ipAddr]bool{}
		for _, a := range st.want {
			want[a] = true
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("step %d: ip addr shows %v, want %v", i, got, want)
		}
		if i == 0 {
			// An address added behind our back is removed again; IPv6
			// (the link-local address) is left alone.
			testenv.Run(t, "ip", "-n", tm.ns, "addr", "add", "10.9.9.9/24", "dev", "nf-eth1")
			tm.sync(t, Spec{Port: "eth1", MAC: testMAC, Addrs: st.addrs})
			if got := showAddrs(t, tm.ns, "nf-eth1"); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("extra address not removed: %v", got)
			}
		}
	}
	if out := testenv.Run(t, "ip", "-n", tm.ns, "-6", "addr", "show", "dev", "nf-eth1"); !strings.Contains(out, "fe80::") {
		t.Fatalf("the IPv6 link-local address is gone:\n%s", out)
	}
	// DisableIPv6 removes it.
	tm.sync(t, Spec{Port: "eth1", MAC: testMAC, DisableIPv6: true})
	if out := testenv.Run(t, "ip", "-n", tm.ns, "-6", "addr", "show", "dev", "nf-eth1"); strings.Contains(out, "fe80::") {
		t.Fatalf("DisableIPv6 left:\n%s", out)
	}
	// And the sysctls are set.
	for key, want := range map[string]string{"ipv4/conf/nf-eth1/rp_filter": "0", "ipv4/conf/nf-eth1/forwarding": "0", "ipv6/conf/nf-eth1/disable_ipv6": "1"} {
		if got := strings.TrimSpace(testenv.Run(t, "ip", "netns", "exec", tm.ns, "cat", "/proc/sys/net/"+key)); got != want {
			t.Errorf("%s = %s, want %s", key, got, want)
		}
	}
}

// TestTwinWaitsForExitingHolder: a name held by a process that is exiting
// is waited for, bounded. (A real kill -9 closes the files too fast to
// catch, so the scan reports the holder as exiting while another Manager
// of this process really holds the name and lets go later.)
func TestTwinWaitsForExitingHolder(t *testing.T) {
	tm := newTestManager(t, Options{})
	tm.sync(t, Spec{Port: "eth1", MAC: testMAC})
	other, err := New(Options{Netns: tm.ns, HolderWait: 5 * time.Second, Inject: func(*Twin, []byte) bool { return true }})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	scans := 0
	other.holders = func(name string) []holder {
		scans++
		return []holder{{pid: syscall.Getpid(), comm: "netfwd", exiting: true}}
	}
	start := time.Now()
	time.AfterFunc(300*time.Millisecond, func() { tm.Close() })
	if err := other.Sync([]Spec{{Port: "eth1", MAC: peerMAC}}); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < 250*time.Millisecond || scans < 2 {
		t.Fatalf("took the name after %v and %d scans: did not wait for the holder", waited, scans)
	}
	checkTwin(t, tm.ns, "nf-eth1", peerMAC, 1500)

	// A holder that never lets go: refused after HolderWait.
	third, err := New(Options{Netns: tm.ns, HolderWait: 200 * time.Millisecond, Inject: func(*Twin, []byte) bool { return true }})
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	third.holders = other.holders
	start = time.Now()
	err = third.Sync([]Spec{{Port: "eth1", MAC: peerMAC}})
	if err == nil || !strings.Contains(err.Error(), "still held open after 200ms") || time.Since(start) < 200*time.Millisecond {
		t.Fatalf("Sync over a holder that never exits: %v after %v", err, time.Since(start))
	}
}
