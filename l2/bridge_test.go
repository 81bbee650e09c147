package l2

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/netfwd/netfwd/wire"
)

func TestLearnForwardFlood(t *testing.T) {
	tb := newTestBridge(t, BridgeAttrs{}, "p1", "p2", "p3")
	a, b := mac(1), mac(2)
	// Unknown destination: flooded to the other two ports, unmodified.
	f := untagged(b, a)
	v, out := tb.send("p1", f)
	if v.Drop != 0 || outPorts(out) != "[p2 p3]" {
		t.Fatalf("flood: verdict %+v out %s", v, outPorts(out))
	}
	if !bytes.Equal(out["p2"][0], f) {
		t.Fatal("flooded frame changed")
	}
	// Reply: a is known on p1 now, so it is unicast there only.
	v, out = tb.send("p2", untagged(a, b))
	if v.Drop != 0 || outPorts(out) != "[p1]" {
		t.Fatalf("unicast: verdict %+v out %s", v, outPorts(out))
	}
	// Back to a on p1 from p1: same port, dropped.
	v, _ = tb.send("p1", untagged(a, mac(3)))
	if v.Drop != DropSamePort {
		t.Fatalf("same port: %v", v.Drop)
	}
	st := tb.d.Stats()
	if st.Drop(DropSamePort) != 1 || st.Ports["p1"].RxPackets != 2 || st.Ports["p1"].TxPackets != 1 {
		t.Fatalf("stats %+v", st)
	}
	if st.FDBLearned != 3 {
		t.Fatalf("learned %d", st.FDBLearned)
	}
}

func TestVLANIngressEgressTagging(t *testing.T) {
	tb := newTestBridge(t, BridgeAttrs{VLANFiltering: new(true)}, "access", "trunk", "other")
	tb.apply(
		VLANAdd{Dev: "access", VID: 10, PVID: true, Untagged: true},
		VLANDel{Dev: "access", VID: 1},
		VLANAdd{Dev: "trunk", VID: 10, VIDEnd: 20},
		VLANAdd{Dev: "other", VID: 20},
	)
	if tb.ports["access"].PVID() != 10 || tb.ports["trunk"].PVID() != 1 {
		t.Fatalf("pvids %d %d", tb.ports["access"].PVID(), tb.ports["trunk"].PVID())
	}
	a, b := mac(1), mac(2)
	// Untagged on access -> VLAN 10 -> tagged 10 on trunk only.
	f := untagged(b, a)
	v, out := tb.send("access", f)
	if v.VID != 10 || outPorts(out) != "[trunk]" {
		t.Fatalf("verdict %+v out %s", v, outPorts(out))
	}
	if want := tagged(b, a, 10); !bytes.Equal(out["trunk"][0], want[:len(out["trunk"][0])]) || len(out["trunk"][0]) != len(f)+4 {
		t.Fatalf("tagging: got %x", out["trunk"][0])
	}
	// Tagged 10 from trunk to a (known on access): untagged out.
	v, out = tb.send("trunk", tagged(a, b, 10))
	if outPorts(out) != "[access]" || !bytes.Equal(out["access"][0], untagged(a, b)[:len(out["access"][0])]) {
		t.Fatalf("untag: %+v %s %x", v, outPorts(out), out["access"])
	}
	// VLAN 30 not on trunk: dropped.
	if v, _ := tb.send("trunk", tagged(a, b, 30)); v.Drop != DropVLANIngress {
		t.Fatalf("non-member vlan: %v", v.Drop)
	}
	// Priority-tagged frame on access: pvid 10, PCP kept on tagged egress.
	pf := buildFrame(frameSpec{dst: wire.BroadcastMAC, src: a, tag: 0, pcp: 5, payload: []byte("x")})
	_, out = tb.send("access", pf)
	if len(out["trunk"]) != 1 || out["trunk"][0][14] != 5<<5 || out["trunk"][0][15] != 10 {
		t.Fatalf("priority tag: %x", out["trunk"])
	}
	// Untagged on other (no pvid: its VLAN 1 was not added... it has the default pvid 1).
	tb.apply(VLANDel{Dev: "other", VID: 1})
	if v, _ := tb.send("other", untagged(a, b)); v.Drop != DropVLANIngress {
		t.Fatalf("no pvid: %v", v.Drop)
	}
}

func TestHostDelivery(t *testing.T) {
	tb := newTestBridge(t, BridgeAttrs{VLANFiltering: new(true)}, "p1", "p2")
	tb.apply(VLANAdd{Dev: "p1", VID: 10}, VLANAdd{Dev: "p2", VID: 10})
	brMAC := tb.b.MAC
	// Bridge not a member of 10 yet: frames to its MAC in 10 are not for it.
	v, _ := tb.send("p1", tagged(brMAC, mac(1), 10))
	if v.Host {
		t.Fatal("delivered to host in a VLAN it is not a member of")
	}
	if err := tb.b.AddHostVLAN(10); err != nil {
		t.Fatal(err)
	}
	v, out := tb.send("p1", tagged(brMAC, mac(1), 10))
	if !v.Host || v.VID != 10 || v.Untagged || v.L3 != 18 || len(out) != 0 {
		t.Fatalf("host: %+v %s", v, outPorts(out))
	}
	// Untagged in VLAN 1 (pvid): the bridge's own pvid VLAN is untagged.
	v, _ = tb.send("p1", untagged(brMAC, mac(1)))
	if !v.Host || v.VID != 1 || !v.Untagged {
		t.Fatalf("host pvid: %+v", v)
	}
	// Broadcast in 10: flooded and delivered.
	v, out = tb.send("p1", tagged(wire.BroadcastMAC, mac(1), 10))
	if !v.Host || outPorts(out) != "[p2]" {
		t.Fatalf("bcast: %+v %s", v, outPorts(out))
	}
	// ReceiveBatch collects host frames.
	tb.b.ReceiveBatch(tb.tx, tb.ports["p1"], [][]byte{tagged(brMAC, mac(1), 10), tagged(mac(9), mac(1), 10)})
	if len(tb.tx.Host) != 1 || tb.tx.Host[0].VID != 10 {
		t.Fatalf("batch host: %+v", tb.tx.Host)
	}
	tb.flush()
	d, local, ok := tb.b.LookupFDB(mac(1), 10)
	if !ok || local || d.Port.Name != "p1" || d.PV.VID != 10 {
		t.Fatalf("LookupFDB: %+v %v %v", d, local, ok)
	}
}

func TestPortStateAndFlags(t *testing.T) {
	tb := newTestBridge(t, BridgeAttrs{}, "p1", "p2", "p3")
	tb.apply(LinkSet{Dev: "p2", State: new(StateBlocking)})
	if v, _ := tb.send("p2", untagged(wire.BroadcastMAC, mac(2))); v.Drop != DropPortState {
		t.Fatalf("blocking ingress: %v", v.Drop)
	}
	if _, out := tb.send("p1", untagged(wire.BroadcastMAC, mac(1))); outPorts(out) != "[p3]" {
		t.Fatalf("blocking egress: %s", outPorts(out))
	}
	tb.apply(LinkSet{Dev: "p2", State: new(StateLearning)})
	if v, _ := tb.send("p2", untagged(wire.BroadcastMAC, mac(2))); v.Drop != DropLearningState {
		t.Fatalf("learning: %v", v.Drop)
	}
	if _, _, ok := tb.b.LookupFDB(mac(2), 0); !ok {
		t.Fatal("learning state did not learn")
	}
	tb.apply(LinkSet{Dev: "p2", State: new(StateForwarding)},
		LinkSet{Dev: "p3", Clear: FlagFlood | FlagBcastFlood},
		LinkSet{Dev: "p1", Clear: FlagLearning})
	if _, out := tb.send("p1", untagged(mac(77), mac(5))); outPorts(out) != "[p2]" {
		t.Fatalf("flood off: %s", outPorts(out))
	}
	if _, _, ok := tb.b.LookupFDB(mac(5), 0); ok {
		t.Fatal("learned with learning off")
	}
	// Isolation: isolated ports don't talk to each other.
	tb.apply(LinkSet{Dev: "p1", Set: FlagIsolated}, LinkSet{Dev: "p2", Set: FlagIsolated},
		LinkSet{Dev: "p3", Set: FlagFlood | FlagBcastFlood})
	if _, out := tb.send("p1", untagged(wire.BroadcastMAC, mac(1))); outPorts(out) != "[p3]" {
		t.Fatalf("isolated: %s", outPorts(out))
	}
	if v, _ := tb.send("p1", untagged(mac(2), mac(1))); v.Drop != DropEgressFiltered {
		t.Fatalf("isolated unicast: %v", v.Drop)
	}
}

func TestMalformedAndInvalid(t *testing.T) {
	tb := newTestBridge(t, BridgeAttrs{VLANFiltering: new(true)}, "p1", "p2")
	cases := []struct {
		f    []byte
		want DropReason
	}{
		{[]byte{1, 2, 3}, DropMalformed},
		{untagged(mac(2), mac(1))[:13], DropMalformed},
		{tagged(mac(2), mac(1), 1)[:16], DropMalformed},
		{untagged(mac(2), wire.MAC{1, 0, 0, 0, 0, 1}), DropInvalidSource},
		{untagged(mac(2), wire.MAC{}), DropInvalidSource},
		{untagged(wire.MustParseMAC("01:80:c2:00:00:02"), mac(1)), DropLinkLocal},
		{tagged(mac(2), mac(1), 4095), DropVLANIngress},
	}
	for i, c := range cases {
		if v, _ := tb.send("p1", c.f); v.Drop != c.want {
			t.Errorf("case %d: got %v want %v", i, v.Drop, c.want)
		}
	}
	// STP BPDUs (01:80:c2:00:00:00) are forwarded: no STP runs here.
	if _, out := tb.send("p1", untagged(wire.MustParseMAC("01:80:c2:00:00:00"), mac(1))); outPorts(out) != "[p2]" {
		t.Fatalf("bpdu: %s", outPorts(out))
	}
	if tb.d.Stats().Ports["p1"].RxDrops != uint64(len(cases)) {
		t.Fatalf("rx drops %d", tb.d.Stats().Ports["p1"].RxDrops)
	}
}

func TestAgeing(t *testing.T) {
	tb := newTestBridge(t, BridgeAttrs{AgeingTime: new(30 * time.Second)}, "p1", "p2")
	tb.send("p1", untagged(wire.BroadcastMAC, mac(1)))
	tb.clock.Advance(20 * time.Second)
	tb.send("p2", untagged(wire.BroadcastMAC, mac(2)))
	tb.clock.Advance(15 * time.Second)
	n, next := tb.b.Age()
	if n != 1 {
		t.Fatalf("aged %d", n)
	}
	if _, _, ok := tb.b.LookupFDB(mac(1), 0); ok {
		t.Fatal("mac1 should be aged out")
	}
	if _, _, ok := tb.b.LookupFDB(mac(2), 0); !ok {
		t.Fatal("mac2 aged too early")
	}
	if next <= 0 || next > int64(15*time.Second) {
		t.Fatalf("next %v", time.Duration(next))
	}
	// Static entries never age.
	tb.apply(FDBAdd{MAC: mac(9), Dev: "p2", Kind: FDBStatic})
	tb.clock.Advance(time.Hour)
	tb.b.Age()
	if _, _, ok := tb.b.LookupFDB(mac(9), 0); !ok {
		t.Fatal("static aged")
	}
	if tb.d.Stats().FDBAged != 2 {
		t.Fatalf("aged counter %d", tb.d.Stats().FDBAged)
	}
	// ageing_time 0: no learning (Linux).
	tb.apply(BridgeSet{Name: "br0", Attrs: BridgeAttrs{AgeingTime: new(time.Duration(0))}})
	tb.send("p1", untagged(wire.BroadcastMAC, mac(20)))
	if _, _, ok := tb.b.LookupFDB(mac(20), 0); ok {
		t.Fatal("learned with ageing_time 0")
	}
}

// The listings behind `bridge vlan show` and `bridge fdb show` (rendered
// by internal/show, whose tests check the text byte for byte).
func TestShowListings(t *testing.T) {
	tb := newTestBridge(t, BridgeAttrs{VLANFiltering: new(true)}, "eth1", "eth2")
	tb.apply(VLANAdd{Dev: "eth1", VID: 10, PVID: true, Untagged: true},
		VLANAdd{Dev: "eth2", VID: 10, VIDEnd: 12},
		FDBAdd{MAC: mac(5), Dev: "eth2", VID: 11, HasVID: true, Kind: FDBStatic, Sticky: true})
	tb.send("eth1", untagged(wire.BroadcastMAC, mac(1)))
	got := fmt.Sprint(tb.b.VLANMemberships())
	want := "[{eth1 [{1 false true} {10 true true}]} {eth2 [{1 true true} {10 false false} {11 false false} {12 false false}]} {br0 [{1 true true}]}]"
	if got != want {
		t.Fatalf("vlans:\n%s\nwant\n%s", got, want)
	}
	var fdb []string
	for _, e := range tb.b.FDB().Entries() {
		dev := "br0"
		if e.Port != nil {
			dev = e.Port.Name
		}
		fdb = append(fdb, fmt.Sprintf("%s %d %s local=%v static=%v sticky=%v learned=%v", e.MAC, e.VID, dev, e.Local, e.Static, e.Sticky, e.Learned))
	}
	wantFDB := []string{
		"02:00:00:00:00:01 10 eth1 local=false static=false sticky=false learned=true",
		"02:00:00:00:00:05 11 eth2 local=false static=true sticky=true learned=false",
		"02:bb:00:00:00:01 0 br0 local=true static=true sticky=false learned=false",
		"02:bb:00:00:00:01 1 br0 local=true static=true sticky=false learned=false",
	}
	if strings.Join(fdb, "\n") != strings.Join(wantFDB, "\n") {
		t.Fatalf("fdb:\n%s\nwant\n%s", strings.Join(fdb, "\n"), strings.Join(wantFDB, "\n"))
	}
}

func TestTxQueueBoundAndErrors(t *testing.T) {
	tb := newTestBridge(t, BridgeAttrs{}, "p1", "p2")
	tx := tb.d.NewTx(TxOptions{QueueLen: 3})
	for i := 0; i < 5; i++ {
		tb.b.Receive(tx, tb.ports["p1"], untagged(wire.BroadcastMAC, mac(1)))
	}
	n := 0
	tx.Flush(func(p *Port, frames [][]byte) {
		n += len(frames)
		tx.CountTxError(p, 1)
	})
	st := tb.d.Stats()
	if n != 3 || st.Drop(DropTxQueueFull) != 2 || st.Drop(DropTxError) != 1 ||
		st.Ports["p2"].TxDrops != 3 || st.Ports["p2"].TxPackets != 3 {
		t.Fatalf("n %d stats %+v", n, st)
	}
}

// Without vlan_filtering tags are not interpreted for forwarding, but the
// host sees the frame's own tag (Linux: the VLAN device on the bridge).
func TestNonFilteringHostSeesTag(t *testing.T) {
	tb := newTestBridge(t, BridgeAttrs{}, "p1", "p2")
	v, out := tb.send("p1", tagged(tb.b.MAC, mac(1), 30))
	if !v.Host || v.VID != 30 || v.Untagged || len(out) != 0 {
		t.Fatalf("tagged to bridge: %+v", v)
	}
	v, _ = tb.send("p1", untagged(tb.b.MAC, mac(1)))
	if !v.Host || v.VID != 0 || !v.Untagged {
		t.Fatalf("untagged to bridge: %+v", v)
	}
	// Forwarded frames keep their tag untouched.
	f := tagged(wire.BroadcastMAC, mac(1), 30)
	_, out = tb.send("p1", f)
	if !bytes.Equal(out["p2"][0], f) {
		t.Fatal("tag changed without vlan_filtering")
	}
}
