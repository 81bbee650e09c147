package afxdp

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"

	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/internal/pktio/pktiotest"
)

// TestXDPVLANTags: XDP sees frames as the driver holds them. Tags in the
// bytes (802.1Q with PCP, VID 0 and 4095, 802.1ad, QinQ) arrive as sent. A
// tag the sender's skb carries in metadata (VLAN offload: here a tc
// program on the sending veth pushes it with bpf_skb_vlan_push, as a VLAN
// device would) is invisible to XDP: the native program restores it with
// the rx_vlan_tag kfunc; in generic mode it is lost (documented; the test
// notices if a kernel changes that).
func TestXDPVLANTags(t *testing.T) {
	for _, mode := range []Attach{AttachNative, AttachGeneric} {
		t.Run(mode.String(), func(t *testing.T) {
			p := pktiotest.NewPair(t)
			port := openXDPIn(t, p.NsB, p.B, PortConfig{Attach: mode})
			if port.Attach() != mode {
				t.Fatalf("attached %v, want %v", port.Attach(), mode)
			}
			w := newXDPWorker(t, WorkerConfig{})
			s, err := w.Bind(port, 0)
			if err != nil {
				t.Fatal(err)
			}
			c := pktiotest.RawSender(t, p.NsA, p.A)
			dst, src := port.MAC, pktiotest.MAC(t, p.NsA, p.A)
			rng := rand.New(rand.NewPCG(3, 4))
			tagged := func(n int, tags ...uint32) []byte {
				inner := pktiotest.Frame(rng, dst, src, n)
				f := append([]byte{}, inner[:12]...)
				for _, tg := range tags {
					f = binary.BigEndian.AppendUint32(f, tg)
				}
				return append(f, inner[12:]...)
			}
			sent := [][]byte{
				tagged(60, 0x8100_a064),
				tagged(60, 0x8100_0000),
				tagged(1510, 0x8100_0fff),
				tagged(1000, 0x88a8_00c8),
				tagged(100, 0x88a8_012c, 0x8100_0010),
				pktiotest.Frame(rng, dst, src, 60),
			}
			pktiotest.Send(t, c, sent...)
			got, _ := pktiotest.RecvN(t, s, len(sent), 2*time.Second)
			if len(got) != len(sent) {
				t.Fatalf("received %d frames, want %d", len(got), len(sent))
			}
			for i := range sent {
				if !bytes.Equal(got[i], sent[i]) {
					t.Errorf("frame %d differs:\n got %x\nwant %x", i, got[i], sent[i])
				}
			}

			// Offloaded tag: VID 100, PCP 3.
			l := vlanPushOnEgress(t, p.NsA, p.A, 0x8100, 0x6064)
			defer l.Close()
			plain := pktiotest.Frame(rng, dst, src, 70)
			pktiotest.Send(t, c, plain)
			got, _ = pktiotest.RecvN(t, s, 1, 2*time.Second)
			if len(got) != 1 {
				t.Fatal("offloaded-tag frame not received")
			}
			want := append(append(append([]byte{}, plain[:12]...), 0x81, 0x00, 0x60, 0x64), plain[12:]...)
			if mode == AttachGeneric || !port.RestoresVLAN() {
				want = plain // the tag is lost
			}
			if !bytes.Equal(got[0], want) {
				t.Errorf("offloaded tag (restore %v):\n got %x\nwant %x", port.RestoresVLAN(), got[0], want)
			}
			if mode == AttachNative && !port.RestoresVLAN() {
				t.Error("native mode on veth without VLAN restore: the kfunc should be there on this kernel")
			}
		})
	}
}

// vlanPushOnEgress attaches a tc (tcx) program to iface in ns that pushes a
// tag into every outgoing skb's metadata (bpf_skb_vlan_push).
func vlanPushOnEgress(t testing.TB, ns, iface string, proto, tci uint16) link.Link {
	t.Helper()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SchedCLS, License: "Dual BSD/GPL",
		Instructions: asm.Instructions{
			asm.Mov.Imm(asm.R2, int32(proto>>8|proto<<8)), // __be16
			asm.Mov.Imm(asm.R3, int32(tci)),
			asm.FnSkbVlanPush.Call(),
			asm.Mov.Imm(asm.R0, 0), // TCX_PASS
			asm.Return(),
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prog.Close() })
	var l link.Link
	err = pktio.InNetns(ns, func() error {
		ifi, err := net.InterfaceByName(iface)
		if err != nil {
			return err
		}
		l, err = link.AttachTCX(link.TCXOptions{Interface: ifi.Index, Program: prog, Attach: ebpf.AttachTCXEgress})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}
