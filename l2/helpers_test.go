package l2

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"
	"testing"

	"github.com/netfwd/netfwd/wire"
)

// frameSpec describes a test frame; built by hand (the layout is simple and
// the tests must control every byte, including malformed ones).
type frameSpec struct {
	dst, src wire.MAC
	tag      int // -1: untagged; 0..4095: 802.1Q tag with this VID (0: priority tag)
	pcp      uint8
	etype    uint16
	payload  []byte
}

func buildFrame(f frameSpec) []byte {
	b := make([]byte, 0, 64+len(f.payload))
	b = append(b, f.dst[:]...)
	b = append(b, f.src[:]...)
	if f.tag >= 0 {
		b = binary.BigEndian.AppendUint16(b, wire.EtherTypeVLAN)
		b = binary.BigEndian.AppendUint16(b, uint16(f.pcp)<<13|uint16(f.tag))
	}
	et := f.etype
	if et == 0 {
		et = 0x88b5 // local experimental
	}
	b = binary.BigEndian.AppendUint16(b, et)
	b = append(b, f.payload...)
	for len(b) < 60 {
		b = append(b, 0)
	}
	return b
}

func untagged(dst, src wire.MAC) []byte {
	return buildFrame(frameSpec{dst: dst, src: src, tag: -1, payload: []byte("hello")})
}

func tagged(dst, src wire.MAC, vid int) []byte {
	return buildFrame(frameSpec{dst: dst, src: src, tag: vid, payload: []byte("hello")})
}

// arpRequest builds a broadcast ARP request (optionally tagged).
func arpRequest(src wire.MAC, sip, tip [4]byte, tag int) []byte {
	p := make([]byte, 28)
	binary.BigEndian.PutUint16(p[0:2], 1)
	binary.BigEndian.PutUint16(p[2:4], wire.EtherTypeIPv4)
	p[4], p[5] = 6, 4
	binary.BigEndian.PutUint16(p[6:8], 1)
	copy(p[8:14], src[:])
	copy(p[14:18], sip[:])
	copy(p[24:28], tip[:])
	return buildFrame(frameSpec{dst: wire.BroadcastMAC, src: src, tag: tag, etype: wire.EtherTypeARP, payload: p})
}

func mac(i int) wire.MAC { return wire.MAC{0x02, 0, 0, 0, byte(i >> 8), byte(i)} }

// testBridge is a domain with one bridge and named ports.
type testBridge struct {
	t     testing.TB
	d     *Domain
	b     *Bridge
	clock *ManualClock
	tx    *Tx
	ports map[string]*Port
}

func newTestBridge(t testing.TB, attrs BridgeAttrs, ports ...string) *testBridge {
	t.Helper()
	clk := NewManualClock()
	d := NewDomain(DomainOptions{Clock: clk})
	if attrs.MAC == nil {
		attrs.MAC = new(wire.MustParseMAC("02:bb:00:00:00:01"))
	}
	ops := []Op{BridgeAdd{Name: "br0", Attrs: attrs}}
	for _, p := range ports {
		ops = append(ops, SetMaster{Port: p, Master: "br0"})
	}
	mustApply(t, d, ops...)
	tb := &testBridge{t: t, d: d, b: d.Bridge("br0"), clock: clk, tx: d.NewTx(TxOptions{}), ports: map[string]*Port{}}
	for _, p := range ports {
		tb.ports[p] = d.Port(p)
	}
	return tb
}

func mustApply(t testing.TB, d *Domain, ops ...Op) {
	t.Helper()
	if err := d.Apply(ops...); err != nil {
		t.Fatal(err)
	}
}

func (tb *testBridge) apply(ops ...Op) { tb.t.Helper(); mustApply(tb.t, tb.d, ops...) }

// send processes one frame and flushes, returning the verdict and the
// outputs per port name (copied).
func (tb *testBridge) send(in string, frame []byte) (Verdict, map[string][][]byte) {
	tb.t.Helper()
	v := tb.b.Receive(tb.tx, tb.ports[in], frame)
	return v, tb.flush()
}

func (tb *testBridge) flush() map[string][][]byte {
	out := map[string][][]byte{}
	tb.tx.Flush(func(p *Port, frames [][]byte) {
		for _, f := range frames {
			out[p.Name] = append(out[p.Name], bytes.Clone(f))
		}
	})
	return out
}

func outPorts(out map[string][][]byte) string {
	var names []string
	for n, fs := range out {
		for range fs {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return fmt.Sprint(names)
}
