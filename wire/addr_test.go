package wire

import (
	"net/netip"
	"testing"
)

func TestAddr4(t *testing.T) {
	a := netip.MustParseAddr("192.0.2.7")
	v := Addr4From(a)
	if v != 0xc0000207 || v.Netip() != a || v.String() != "192.0.2.7" {
		t.Fatalf("%#x %v %q", uint32(v), v.Netip(), v.String())
	}
	if Addr4From(netip.MustParseAddr("::ffff:192.0.2.7")) != v {
		t.Fatal("IPv4-mapped address")
	}
	var b [4]byte
	v.Put(b[:])
	if b != a.As4() || Addr4FromBytes(b[:]) != v {
		t.Fatalf("% x", b)
	}
	for _, c := range []struct {
		s       string
		martian bool
	}{
		{"0.0.0.0", true}, {"0.1.2.3", true}, {"127.0.0.1", true}, {"224.0.0.1", true},
		{"239.255.255.255", true}, {"255.255.255.255", true}, {"10.0.0.1", false},
		{"240.0.0.1", false}, {"1.0.0.0", false}, {"192.0.2.255", false},
	} {
		if got := Addr4From(netip.MustParseAddr(c.s)).IsMartianSource(); got != c.martian {
			t.Errorf("%s: martian source %v", c.s, got)
		}
	}
}

func TestMAC(t *testing.T) {
	m, err := ParseMAC("02:00:5e:10:00:0A")
	if err != nil || m.String() != "02:00:5e:10:00:0a" || !m.IsValidUnicast() {
		t.Fatalf("%v %v", m, err)
	}
	for _, bad := range []string{"", "02:00:5e:10:00", "02:00:5e:10:00:0a:0b", "zz:00:5e:10:00:0a"} {
		if _, err := ParseMAC(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	if !BroadcastMAC.IsBroadcast() || !BroadcastMAC.IsMulticast() || BroadcastMAC.IsValidUnicast() || !(MAC{}).IsZero() {
		t.Fatal("broadcast/zero classification")
	}
	frame := Ethernet(append(BroadcastMAC[:], m[:]...))
	if !frame.DstIsBroadcast() || !frame.DstIsMulticast() || !frame.SrcIsValid() || frame.Src() != m {
		t.Fatal("frame view")
	}
	llMAC, stpMAC := MustParseMAC("01:80:c2:00:00:0e"), MustParseMAC("01:80:c2:00:00:00")
	ll := Ethernet(append(llMAC[:], make([]byte, 6)...))
	stp := Ethernet(append(stpMAC[:], make([]byte, 6)...))
	if !ll.DstIsLinkLocalControl() || stp.DstIsLinkLocalControl() || ll.SrcIsValid() {
		t.Fatal("link-local control / zero source")
	}
}
