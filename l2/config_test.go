package l2

import (
	"bytes"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/netfwd/netfwd/wire"
)

// A whole file is checked first: any error means nothing changes, and every
// failing op is reported with its index.
func TestPrepareAllOrNothing(t *testing.T) {
	d := NewDomain(DomainOptions{Clock: NewManualClock()})
	ops := []Op{
		BridgeAdd{Name: "br0", Attrs: BridgeAttrs{VLANFiltering: new(true)}},
		SetMaster{Port: "eth1", Master: "br0"},
		VLANAdd{Dev: "eth1", VID: 10, PVID: true, Untagged: true},
		VLANAdd{Dev: "eth2", VID: 10},                                            // 3: eth2 is not a bridge port
		VLANAdd{Dev: "eth1", VID: 5000},                                          // 4: bad VID
		VLANAdd{Dev: "eth1", VID: 20, VIDEnd: 22, PVID: true},                    // 5: pvid on a range
		FDBAdd{MAC: mac(1), Dev: "eth1", VID: 30, HasVID: true, Kind: FDBStatic}, // 6: VLAN 30 not on eth1
		FDBAdd{MAC: mac(1), Dev: "eth1", VID: 10, HasVID: true, Kind: FDBStatic},
		FDBAdd{MAC: mac(1), Dev: "eth1", VID: 10, HasVID: true, Kind: FDBStatic}, // 8: exists (earlier op)
		LinkSet{Dev: "eth1", State: new(PortState(9))},                           // 9: bad state
		SetMaster{Port: "eth3", Master: "br9"},                                   // 10: no such bridge
		FDBDel{MAC: mac(2), Dev: "eth1", VID: 10, HasVID: true},                  // 11: not found
		BridgeAdd{Name: "eth1"},                                                  // 12: exists
		VLANDel{Dev: "eth1", VID: 11},                                            // 13: not configured
		MDBAdd{Bridge: "br0", Port: "eth1", Group: mac(1), VID: 10},              // 14: not multicast
		FDBAdd{MAC: mac(5), Dev: "br0", Kind: FDBStatic},                         // 15: bridge entry must be local
	}
	c, errs := d.Prepare(ops)
	if c != nil {
		t.Fatal("change returned despite errors")
	}
	var idx []int
	for _, e := range errs {
		idx = append(idx, e.Index)
	}
	want := []int{3, 4, 5, 6, 8, 9, 10, 11, 12, 13, 14, 15}
	if len(idx) != len(want) {
		t.Fatalf("errors at %v, want %v:\n%v", idx, want, errs)
	}
	for i := range want {
		if idx[i] != want[i] {
			t.Fatalf("errors at %v, want %v", idx, want)
		}
	}
	if d.Bridge("br0") != nil || d.Port("eth1") != nil {
		t.Fatal("a failed Prepare changed the state")
	}
	// The valid subset commits, and the result matches what validation saw.
	var good []Op
	for i, op := range ops {
		bad := false
		for _, w := range want {
			bad = bad || w == i
		}
		if !bad {
			good = append(good, op)
		}
	}
	c, errs = d.Prepare(good)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if d.Bridge("br0") != nil {
		t.Fatal("Prepare applied something")
	}
	if err := c.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := c.Commit(); !errors.Is(err, errChangeDone) {
		t.Fatalf("second commit: %v", err)
	}
	p := d.Port("eth1")
	if p == nil || p.Bridge() == nil || p.PVID() != 10 || !p.VLAN(10).Untagged() {
		t.Fatalf("eth1 after commit: %+v", p)
	}
	if _, _, ok := d.Bridge("br0").LookupFDB(mac(1), 10); !ok {
		t.Fatal("static entry missing")
	}
}

// A change prepared against a state that another commit invalidated fails
// as a whole.
func TestCommitRevalidates(t *testing.T) {
	d := NewDomain(DomainOptions{})
	mustApply(t, d, BridgeAdd{Name: "br0"}, SetMaster{Port: "eth1", Master: "br0"})
	c1, errs := d.Prepare([]Op{VLANAdd{Dev: "eth1", VID: 7}, LinkSet{Dev: "eth1", Clear: FlagFlood}})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	mustApply(t, d, SetMaster{Port: "eth1"}) // nomaster
	if err := c1.Commit(); err == nil || !strings.Contains(err.Error(), "not a bridge port") {
		t.Fatalf("stale commit: %v", err)
	}
	if d.Port("eth1").VLAN(7) != nil {
		t.Fatal("stale commit applied")
	}
	// Unrelated changes in between do not invalidate.
	mustApply(t, d, SetMaster{Port: "eth1", Master: "br0"})
	c2, _ := d.Prepare([]Op{VLANAdd{Dev: "eth1", VID: 7}})
	mustApply(t, d, SetMaster{Port: "eth2", Master: "br0"})
	if err := c2.Commit(); err != nil {
		t.Fatal(err)
	}
}

func TestFDBAddWithoutVLANAddsAllVLANs(t *testing.T) {
	tb := newTestBridge(t, BridgeAttrs{VLANFiltering: new(true)}, "eth1")
	tb.apply(VLANAdd{Dev: "eth1", VID: 10, VIDEnd: 11},
		FDBAdd{MAC: mac(7), Dev: "eth1", Kind: FDBStatic})
	for _, vid := range []uint16{0, 1, 10, 11} {
		d, local, ok := tb.b.LookupFDB(mac(7), vid)
		if vid == 0 {
			// VID 0 entries are not looked up with vlan_filtering; check the table.
			found := false
			for _, e := range tb.b.FDB().Entries() {
				found = found || (e.MAC == mac(7) && e.VID == 0)
			}
			if !found {
				t.Fatal("no VID 0 entry")
			}
			continue
		}
		if !ok || local || d.Port.Name != "eth1" {
			t.Fatalf("vid %d: %+v %v %v", vid, d, local, ok)
		}
	}
	// Default kind (no keyword) is permanent: delivered to the host.
	tb.apply(FDBAdd{MAC: mac(8), Dev: "eth1", VID: 10, HasVID: true})
	if _, local, ok := tb.b.LookupFDB(mac(8), 10); !ok || !local {
		t.Fatal("permanent entry is not local")
	}
	// fdb add over a learned entry replaces it; over a configured one fails.
	tb.send("eth1", tagged(wire.BroadcastMAC, mac(9), 10))
	tb.apply(FDBAdd{MAC: mac(9), Dev: "eth1", VID: 10, HasVID: true, Kind: FDBStatic})
	if err := tb.d.Apply(FDBAdd{MAC: mac(9), Dev: "eth1", VID: 10, HasVID: true, Kind: FDBStatic}); err == nil {
		t.Fatal("duplicate fdb add accepted")
	}
	tb.apply(FDBAdd{MAC: mac(9), Dev: "eth1", VID: 10, HasVID: true, Kind: FDBDynamic, Replace: true})
	tb.apply(FDBDel{MAC: mac(9), Dev: "eth1", VID: 10, HasVID: true})
	if _, _, ok := tb.b.LookupFDB(mac(9), 10); ok {
		t.Fatal("fdb del")
	}
}

func TestVLANFlagReplaceAndDefaultPVID(t *testing.T) {
	tb := newTestBridge(t, BridgeAttrs{VLANFiltering: new(true)}, "eth1")
	p := tb.ports["eth1"]
	// Re-adding a VLAN replaces its flags (Linux): pvid and untagged go away.
	tb.apply(VLANAdd{Dev: "eth1", VID: 1})
	if p.PVID() != 0 || p.VLAN(1).Untagged() {
		t.Fatalf("flags not replaced: pvid %d", p.PVID())
	}
	// vlan_default_pvid change moves untouched defaults only.
	tb.apply(SetMaster{Port: "eth2", Master: "br0"},
		BridgeSet{Name: "br0", Attrs: BridgeAttrs{DefaultPVID: new(uint16(5))}})
	p2 := tb.d.Port("eth2")
	tb.ports["eth2"] = p2
	if p2.PVID() != 5 || p2.VLAN(1) != nil || p.VLAN(1) == nil || p.VLAN(5) != nil {
		t.Fatalf("default pvid move: eth2 pvid %d, eth1 vlan1 %v", p2.PVID(), p.VLAN(1))
	}
	if tb.b.HostPVID() != 5 {
		t.Fatalf("bridge pvid %d", tb.b.HostPVID())
	}
	// Removing a VLAN flushes the port's dynamic entries in it.
	tb.send("eth2", untagged(wire.BroadcastMAC, mac(3)))
	if _, _, ok := tb.b.LookupFDB(mac(3), 5); !ok {
		t.Fatal("not learned")
	}
	tb.apply(VLANDel{Dev: "eth2", VID: 5})
	if _, _, ok := tb.b.LookupFDB(mac(3), 5); ok {
		t.Fatal("vlan del did not flush")
	}
	// nomaster flushes everything of the port.
	tb.apply(FDBAdd{MAC: mac(4), Dev: "eth1", VID: 1, HasVID: true, Kind: FDBStatic}, SetMaster{Port: "eth1"})
	if _, _, ok := tb.b.LookupFDB(mac(4), 1); ok || p.Bridge() != nil {
		t.Fatal("release did not flush")
	}
}

func TestNeighbourSuppression(t *testing.T) {
	tb := newTestBridge(t, BridgeAttrs{VLANFiltering: new(true)}, "host", "vx", "lan")
	for _, p := range []string{"host", "vx", "lan"} {
		tb.apply(VLANAdd{Dev: p, VID: 10})
	}
	tb.apply(LinkSet{Dev: "vx", Set: FlagNeighSuppress})
	remote, requester, router := mac(0x20), mac(0x10), mac(0x30)
	// remote lives behind the suppress port.
	tb.send("vx", tagged(wire.BroadcastMAC, remote, 10))
	ip := func(b byte) netip.Addr { return netip.AddrFrom4([4]byte{10, 0, 0, b}) }
	if err := tb.b.SetNeighbor(10, ip(2), remote); err != nil {
		t.Fatal(err)
	}
	if err := tb.b.SetOwnAddress(10, ip(1), router); err != nil {
		t.Fatal(err)
	}
	req := arpRequest(requester, [4]byte{10, 0, 0, 9}, [4]byte{10, 0, 0, 2}, 10)
	_, out := tb.send("host", req)
	// Answered back to host, flooded to lan only.
	if outPorts(out) != "[host lan]" {
		t.Fatalf("suppressed request went to %s", outPorts(out))
	}
	rep := out["host"][0]
	if wire.MAC(rep[0:6]) != requester || wire.MAC(rep[6:12]) != remote || rep[12] != 0x81 || rep[15] != 10 ||
		rep[25] != 2 || wire.MAC(rep[26:32]) != remote || rep[35] != 2 || rep[45] != 9 {
		t.Fatalf("reply %x", rep)
	}
	// Request for the router's own address: no proxy reply, not to vx.
	_, out = tb.send("host", arpRequest(requester, [4]byte{10, 0, 0, 9}, [4]byte{10, 0, 0, 1}, 10))
	if outPorts(out) != "[lan]" {
		t.Fatalf("own address: %s", outPorts(out))
	}
	// Unknown target: flooded everywhere.
	_, out = tb.send("host", arpRequest(requester, [4]byte{10, 0, 0, 9}, [4]byte{10, 0, 0, 77}, 10))
	if outPorts(out) != "[lan vx]" {
		t.Fatalf("unknown: %s", outPorts(out))
	}
	// Requests from the suppress port itself are forwarded untouched.
	_, out = tb.send("vx", arpRequest(remote, [4]byte{10, 0, 0, 2}, [4]byte{10, 0, 0, 2}, 10))
	if outPorts(out) != "[host lan]" {
		t.Fatalf("from vx: %s", outPorts(out))
	}
	if tb.d.Stats().ProxyReplies != 1 {
		t.Fatalf("proxy replies %d", tb.d.Stats().ProxyReplies)
	}
}

func TestMulticastFilter(t *testing.T) {
	tb := newTestBridge(t, BridgeAttrs{VLANFiltering: new(true)}, "a", "b", "c")
	for _, p := range []string{"a", "b", "c"} {
		tb.apply(VLANAdd{Dev: p, VID: 10}, LinkSet{Dev: p, Clear: FlagMcastFlood})
	}
	g1, g2, other := wire.MustParseMAC("01:00:5e:00:00:01"), wire.MustParseMAC("01:00:5e:00:00:02"), wire.MustParseMAC("01:00:5e:55:44:33")
	tb.apply(MDBAdd{Bridge: "br0", Port: "b", Group: g1, VID: 10})
	if v, _ := tb.send("a", tagged(other, mac(1), 10)); v.Drop != DropMcastFiltered {
		t.Fatalf("unwanted group: %+v", v)
	}
	if _, out := tb.send("a", tagged(g1, mac(1), 10)); outPorts(out) != "[b]" {
		t.Fatalf("mdb group: %s", outPorts(out))
	}
	// Host-joined group: delivered to the host (the bridge must be a member).
	tb.apply(VLANAdd{Dev: "br0", VID: 10})
	if err := tb.b.JoinGroup(10, g2); err != nil {
		t.Fatal(err)
	}
	if v, out := tb.send("a", tagged(g2, mac(1), 10)); !v.Host || len(out) != 0 {
		t.Fatalf("host group: %+v %s", v, outPorts(out))
	}
	// Broadcast always passes.
	if _, out := tb.send("a", tagged(wire.BroadcastMAC, mac(1), 10)); outPorts(out) != "[b c]" {
		t.Fatalf("broadcast: %s", outPorts(out))
	}
	// One member with mcast_flood: unknown groups pass and flood to it.
	tb.apply(LinkSet{Dev: "c", Set: FlagMcastFlood})
	if _, out := tb.send("a", tagged(other, mac(1), 10)); outPorts(out) != "[c]" {
		t.Fatalf("mcast_flood member: %s", outPorts(out))
	}
	if got := tb.b.MDB(); len(got) != 1 || got[0].Port != "b" {
		t.Fatalf("mdb %v", got)
	}
}

// A port moving to another bridge leaves nothing behind in the first one.
func TestPortMovesBetweenBridges(t *testing.T) {
	tb := newTestBridge(t, BridgeAttrs{VLANFiltering: new(true)}, "a", "b", "m")
	tb.apply(VLANAdd{Dev: "m", VID: 10}, VLANAdd{Dev: "a", VID: 10},
		BridgeAdd{Name: "br1", Attrs: BridgeAttrs{VLANFiltering: new(true)}},
		SetMaster{Port: "x", Master: "br1"}, VLANAdd{Dev: "x", VID: 10},
		SetMaster{Port: "m", Master: "br1"}, VLANAdd{Dev: "m", VID: 10})
	br1 := tb.d.Bridge("br1")
	m := tb.ports["m"]
	if m.Bridge() != br1 || len(tb.b.Members()) != 2 {
		t.Fatalf("m in %v, br0 members %d", m.Bridge().Name, len(tb.b.Members()))
	}
	// Broadcast in br0 VLAN 10 must not reach m; in br1 it must reach x.
	if _, out := tb.send("a", tagged(wire.BroadcastMAC, mac(1), 10)); outPorts(out) != "[]" {
		t.Fatalf("br0 flood reached %s", outPorts(out))
	}
	v := br1.Receive(tb.tx, m, tagged(wire.BroadcastMAC, mac(2), 10))
	out := tb.flush()
	if v.Drop != 0 || outPorts(out) != "[x]" {
		t.Fatalf("br1 flood: %+v %s", v, outPorts(out))
	}
	// Deleting br1 releases its ports.
	tb.apply(BridgeDel{Name: "br1"})
	if m.Bridge() != nil || tb.d.Bridge("br1") != nil {
		t.Fatal("bridge delete")
	}
	if v := br1.Receive(tb.tx, m, untagged(wire.BroadcastMAC, mac(2))); v.Drop != DropNotBridged {
		t.Fatalf("released port: %v", v.Drop)
	}
	tb.flush()
}

// The egress API l3 uses: Send tags from the port-VLAN, routed ports and
// raw port-VLANs leave frames as they are, FloodVLAN floods host frames.
func TestEgressAPI(t *testing.T) {
	tb := newTestBridge(t, BridgeAttrs{VLANFiltering: new(true)}, "trunk", "access")
	tb.apply(VLANAdd{Dev: "trunk", VID: 10}, VLANAdd{Dev: "access", VID: 10, PVID: true, Untagged: true})
	r, err := tb.d.EnsurePort("eth0", wire.MAC{})
	if err != nil {
		t.Fatal(err)
	}
	f := untagged(mac(2), tb.b.MAC)
	tb.tx.Send(tb.ports["trunk"].VLAN(10).Dst(), f, -1)
	tb.tx.Send(tb.ports["access"].VLAN(10).Dst(), f, -1)
	tb.tx.Send(r.Routed(), f, -1)
	out := tb.flush()
	if len(out["trunk"][0]) != len(f)+4 || out["trunk"][0][15] != 10 || !bytes.Equal(out["access"][0], f) || !bytes.Equal(out["eth0"][0], f) {
		t.Fatalf("send: %x / %x / %x", out["trunk"], out["access"], out["eth0"])
	}
	if vid, tagged := tb.ports["trunk"].VLAN(10).Dst().EgressTag(); vid != 10 || !tagged {
		t.Fatal("EgressTag")
	}
	if n := tb.b.Output(tb.tx, 10, untagged(wire.BroadcastMAC, tb.b.MAC), -1); n != 2 {
		t.Fatalf("Output broadcast: %d copies", n)
	}
	out = tb.flush()
	if outPorts(out) != "[access trunk]" || out["trunk"][0][15] != 10 {
		t.Fatalf("Output broadcast: %s", outPorts(out))
	}
	// Known unicast goes to its port only, and not if the port is blocking.
	tb.send("trunk", tagged(wire.BroadcastMAC, mac(5), 10))
	if n := tb.b.Output(tb.tx, 10, untagged(mac(5), tb.b.MAC), -1); n != 1 {
		t.Fatalf("Output unicast: %d", n)
	}
	if out := tb.flush(); outPorts(out) != "[trunk]" {
		t.Fatalf("Output unicast went to %s", outPorts(out))
	}
	tb.apply(LinkSet{Dev: "trunk", State: new(StateBlocking)})
	if n := tb.b.Output(tb.tx, 10, untagged(mac(5), tb.b.MAC), -1); n != 0 {
		t.Fatal("Output to a blocking port")
	}
	// Unknown unicast floods; the bridge's own address goes nowhere.
	if n := tb.b.Output(tb.tx, 10, untagged(mac(66), tb.b.MAC), -1); n != 1 {
		t.Fatalf("Output unknown: %d", n)
	}
	tb.apply(VLANAdd{Dev: "br0", VID: 10})
	if n := tb.b.Output(tb.tx, 10, untagged(tb.b.MAC, tb.b.MAC), -1); n != 0 {
		t.Fatal("Output to the bridge's own address")
	}
	tb.flush()
	// SendTagged: strip for untagged port-VLANs, rewrite the VID for tagged.
	tf := buildFrame(frameSpec{dst: mac(2), src: tb.b.MAC, tag: 99, pcp: 3})
	tb.tx.SendTagged(tb.ports["trunk"].VLAN(10).Dst(), tf, -1)
	tb.tx.SendTagged(tb.ports["access"].VLAN(10).Dst(), tf, -1)
	out = tb.flush()
	if got := out["trunk"][0]; len(got) != len(tf) || got[14] != 3<<5 || got[15] != 10 {
		t.Fatalf("SendTagged trunk %x", got)
	}
	if got := out["access"][0]; len(got) != len(tf)-4 || got[12] != 0x88 {
		t.Fatalf("SendTagged access %x", got)
	}
	// A local address for a VLAN interface with its own MAC.
	rmac := wire.MustParseMAC("02:00:00:00:aa:aa")
	if err := tb.b.AddLocalAddress(rmac, 10); err != nil {
		t.Fatal(err)
	}
	if v, _ := tb.send("access", untagged(rmac, mac(8))); !v.Host || v.VID != 10 {
		t.Fatalf("local address: %+v", v)
	}
	tb.b.DelLocalAddress(rmac, 10)
	if _, local, _ := tb.b.LookupFDB(rmac, 10); local {
		t.Fatal("DelLocalAddress")
	}
	if _, err := tb.d.EnsurePort("br0", wire.MAC{}); err == nil {
		t.Fatal("EnsurePort accepted a bridge name")
	}
}

// Ops render back to the iproute2 lines they came from (error messages).
func TestOpStrings(t *testing.T) {
	cases := map[Op]string{
		BridgeAdd{Name: "br0", Attrs: BridgeAttrs{VLANFiltering: new(true), AgeingTime: new(300 * time.Second)}}: "link add br0 type bridge vlan_filtering 1 ageing_time 30000",
		SetMaster{Port: "eth1", Master: "br0"}:                                  "link set eth1 master br0",
		VLANAdd{Dev: "eth1", VID: 10, VIDEnd: 20, Untagged: true}:               "bridge vlan add dev eth1 vid 10-20 untagged",
		FDBAdd{MAC: mac(1), Dev: "eth1", VID: 5, HasVID: true, Kind: FDBStatic}: "bridge fdb add 02:00:00:00:00:01 dev eth1 vlan 5 static",
		LinkSet{Dev: "eth1", Clear: FlagLearning, State: new(StateBlocking)}:    "bridge link set dev eth1 learning off state 4",
	}
	for op, want := range cases {
		if op.String() != want {
			t.Errorf("got %q want %q", op.String(), want)
		}
	}
}

// An entry flushed by an earlier op of the same batch (its port left the
// bridge, or the bridge was deleted) can be added again in that batch.
func TestPrepareSeesFlushesOfTheBatch(t *testing.T) {
	d := NewDomain(DomainOptions{})
	mac := wire.MustParseMAC("02:00:00:00:00:33")
	grp := wire.MustParseMAC("01:00:5e:00:00:05")
	if err := d.Apply(BridgeAdd{Name: "br0"}, SetMaster{Port: "p1", Master: "br0"},
		FDBAdd{MAC: mac, Dev: "p1", Kind: FDBStatic}, MDBAdd{Bridge: "br0", Port: "p1", Group: grp}); err != nil {
		t.Fatal(err)
	}
	if err := d.Apply(SetMaster{Port: "p1"}, SetMaster{Port: "p1", Master: "br0"},
		FDBAdd{MAC: mac, Dev: "p1", Kind: FDBStatic}, MDBAdd{Bridge: "br0", Port: "p1", Group: grp}); err != nil {
		t.Fatalf("re-adding after nomaster: %v", err)
	}
	if err := d.Apply(BridgeDel{Name: "br0"}, BridgeAdd{Name: "br0"}, SetMaster{Port: "p1", Master: "br0"},
		FDBAdd{MAC: mac, Dev: "p1", Kind: FDBStatic}, MDBAdd{Bridge: "br0", Port: "p1", Group: grp}); err != nil {
		t.Fatalf("re-adding after a bridge delete: %v", err)
	}
	// Without a flush in between, a duplicate is still an error.
	if err := d.Apply(FDBAdd{MAC: mac, Dev: "p1", Kind: FDBStatic}); err == nil {
		t.Fatal("duplicate fdb add accepted")
	}
}
