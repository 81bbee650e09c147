package hostpath

// Persistent twins (Options.Persist) and the twin keeper: a twin outlives
// the process that made it, with its carrier, and the next Manager adopts
// it without a single link or address message; RemoveTwins deletes it.

import (
	"bufio"
	"errors"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/testenv"
)

// monitor runs `ip monitor link address` in ns and returns a function that
// stops it and returns the lines it printed about name.
func monitor(t *testing.T, ns, name string) func() []string {
	t.Helper()
	cmd := exec.Command("ip", "-n", ns, "monitor", "link", "address")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan []string, 1)
	go func() {
		var got []string
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.Contains(sc.Text(), name) {
				got = append(got, sc.Text())
			}
		}
		lines <- got
	}()
	time.Sleep(200 * time.Millisecond) // subscribed
	return func() []string {
		time.Sleep(200 * time.Millisecond) // late messages
		cmd.Process.Kill()
		cmd.Wait()
		return <-lines
	}
}

func TestTwinPersistsAndIsAdopted(t *testing.T) {
	testenv.RequireRoot(t)
	ns := testenv.Netns(t, "hp")
	addr := netip.PrefixFrom(routerIP, 24)
	spec := Spec{Port: "eth1", MAC: testMAC, Addrs: []netip.Prefix{addr}}
	t.Cleanup(func() { RemoveTwins(ns, nil) })

	// A live process holding a TAP of the same name in another namespace
	// (another netfwd's twin) is no holder of ours.
	startChild(t, testenv.Netns(t, "hp"), "nf-eth1")

	// A process makes the twin and dies by kill -9: the twin stays, with
	// its carrier (the keeper holds it).
	child := startChild(t, ns, "nf-eth1", "persist")
	before, ok := showLink(t, ns, "nf-eth1")
	if !ok || !before.Linkinfo.Data.Persist {
		t.Fatalf("twin %+v: want a persistent TAP", before)
	}
	// The kernel's own announcement of the link-local address (after
	// duplicate address detection) is not part of the restart.
	for range 250 {
		if testenv.Run(t, "ip", "-n", ns, "-6", "addr", "show", "dev", "nf-eth1", "tentative") == "" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopMon := monitor(t, ns, "nf-eth1")
	child.Process.Signal(syscall.SIGKILL)
	child.Wait()
	time.Sleep(300 * time.Millisecond)
	after, ok := showLink(t, ns, "nf-eth1")
	if !ok || after.Ifindex != before.Ifindex || after.has("NO-CARRIER") || !after.has("LOWER_UP") {
		t.Fatalf("after kill -9 of its maker: %+v (was %+v)", after, before)
	}

	// The next Manager adopts it: same ifindex, address and MAC, and the
	// kernel announces nothing.
	tm := newTestManager(t, Options{Netns: ns, Persist: true, Keeper: testKeeper})
	tm.sync(t, spec)
	tw := tm.Twin("eth1")
	if tw.Ifindex() != before.Ifindex {
		t.Fatalf("adopted twin has ifindex %d, was %d", tw.Ifindex(), before.Ifindex)
	}
	if got := showAddrs(t, ns, "nf-eth1"); len(got) != 1 || !got[ipAddr{Local: "10.0.0.1", Prefixlen: 24, Broadcast: "10.0.0.255"}] {
		t.Fatalf("addresses %v", got)
	}
	if msgs := stopMon(); len(msgs) != 0 {
		t.Fatalf("the restart was announced:\n%s", strings.Join(msgs, "\n"))
	}
	// It works: the kernel's ARP request for a neighbour leaves through
	// the adopted file.
	testenv.Output("ip", "netns", "exec", ns, "ping", "-c", "1", "-W", "0.2", peerIP.String()) // unanswered
	tm.next(t, "ARP request", func(f []byte) bool { return len(f) >= 14 && f[12] == 0x08 && f[13] == 0x06 })

	// A differing spec is fixed in place on adoption (MAC), not by a new
	// device: Close (the twin stays), a new Manager with another MAC.
	tm.Close()
	m2 := newTestManager(t, Options{Netns: ns, Persist: true, Keeper: testKeeper}).Manager
	spec.MAC = peerMAC
	if err := m2.Sync([]Spec{spec}); err != nil {
		t.Fatal(err)
	}
	if l, _ := showLink(t, ns, "nf-eth1"); l.Ifindex != before.Ifindex || l.Address != "02:5e:10:00:00:02" || !l.Linkinfo.Data.Persist {
		t.Fatalf("after a MAC change: %+v (ifindex was %d)", l, before.Ifindex)
	}

	// A running Manager's twin is refused by RemoveTwins; after Close it
	// goes, and its keeper with it.
	if _, err := RemoveTwins(ns, nil); err == nil || !strings.Contains(err.Error(), "held by a running process") {
		t.Fatalf("RemoveTwins of a live twin: %v", err)
	}
	m2.Close()
	removed, err := RemoveTwins(ns, nil)
	if err != nil || len(removed) != 1 || removed[0] != "nf-eth1" {
		t.Fatalf("RemoveTwins: %v %v", removed, err)
	}
	waitGone(t, ns, "nf-eth1")
	id, err := netnsID(ns)
	if err != nil {
		t.Fatal(err)
	}
	if hs := inNetns(tapHolders("/proc", "nf-eth1"), id); len(hs) != 0 {
		t.Fatalf("still held after RemoveTwins: %v", hs)
	}
}

// TestKeeperHoldsExtraFiles: files given to KeepAlso outlive the Manager
// in its keeper, exactly as long as the twins do; a new set replaces the
// old one in the keeper too. A pipe's write end stands for the file (the
// read end sees EOF once nobody holds it).
func TestKeeperHoldsExtraFiles(t *testing.T) {
	tm := newTestManager(t, Options{Persist: true, Keeper: testKeeper})
	t.Cleanup(func() { RemoveTwins(tm.ns, nil) })
	tm.sync(t, Spec{Port: "eth1", MAC: testMAC})
	held := func(r *os.File, wait time.Duration) bool {
		r.SetReadDeadline(time.Now().Add(wait))
		_, err := r.Read(make([]byte, 1))
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
		return errors.Is(err, os.ErrDeadlineExceeded)
	}
	pipe := func() (*os.File, *os.File) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r, w
	}
	r1, w1 := pipe()
	tm.KeepAlso(map[string]*os.File{"one": w1})
	if !held(r1, 100*time.Millisecond) {
		t.Fatal("the file given to KeepAlso is not held")
	}
	// A new set: the keeper is replaced, the first file let go by all.
	r2, w2 := pipe()
	tm.KeepAlso(map[string]*os.File{"two": w2})
	if held(r1, 3*time.Second) {
		t.Fatal("a file KeepAlso no longer lists is still held")
	}
	// The Manager goes (Persist): its keeper holds the file, as it holds
	// the twin.
	tm.Close()
	if !held(r2, 300*time.Millisecond) {
		t.Fatal("the keeper let go of the file when the Manager closed")
	}
	// The twins removed, the keeper ends and the file goes with it.
	if _, err := RemoveTwins(tm.ns, nil); err != nil {
		t.Fatal(err)
	}
	if held(r2, 3*time.Second) {
		t.Fatal("the file is still held after RemoveTwins ended the keeper")
	}
}
