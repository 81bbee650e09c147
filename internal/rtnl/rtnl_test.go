package rtnl

import (
	"errors"
	"net/netip"
	"reflect"
	"testing"
)

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }
func ip(s string) netip.Addr    { return netip.MustParseAddr(s) }

// oneMessage splits a buffer holding exactly one message.
func oneMessage(t *testing.T, b []byte) (Header, []byte) {
	t.Helper()
	h, body, rest, err := NextMessage(b)
	if err != nil || len(rest) != 0 {
		t.Fatalf("NextMessage: %v, %d bytes left", err, len(rest))
	}
	return h, body
}

func TestRouteRoundTrip(t *testing.T) {
	cases := []Route{
		{Family: AF_INET, DstLen: 24, Table: 254, Protocol: 186, Type: RTN_UNICAST, Dst: ip("198.51.100.0"),
			Priority: 20, HasPriority: true, NHID: 7},
		{Family: AF_INET, DstLen: 32, Table: 255, Protocol: 2, Scope: 254, Type: RTN_LOCAL, Dst: ip("192.0.2.1"),
			Prefsrc: ip("192.0.2.1"), OIF: 3},
		{Family: AF_INET, DstLen: 0, Table: 1000, Protocol: 12, Type: RTN_UNICAST, Dst: ip("0.0.0.0"),
			Gateway: ip("192.0.2.254"), OIF: 2, Flags: RTNH_F_ONLINK},
		{Family: AF_INET, DstLen: 8, Table: 254, Protocol: 186, Type: RTN_UNICAST, Dst: ip("10.0.0.0"),
			Multipath: []NextHop{{Weight: 1, OIF: 2, Gateway: ip("192.0.2.1")}, {Weight: 256, OIF: 3, Gateway: ip("198.18.0.1"), Flags: RTNH_F_ONLINK}}},
		{Family: AF_INET, DstLen: 16, Table: 254, Type: RTN_BLACKHOLE, Dst: ip("10.9.0.0")},
		{Family: AF_INET6, DstLen: 64, Table: 254, Type: RTN_UNICAST, Dst: ip("2001:db8::"), OIF: 2},
	}
	for _, want := range cases {
		b := AppendRoute(nil, RTM_NEWROUTE, NLM_F_REQUEST|NLM_F_CREATE, 9, &want)
		h, body := oneMessage(t, b)
		if h.Type != RTM_NEWROUTE || h.Seq != 9 || int(h.Len) != len(b) {
			t.Fatalf("header %+v (len %d)", h, len(b))
		}
		var got Route
		if err := got.Decode(body); err != nil {
			t.Fatalf("decode %+v: %v", want, err)
		}
		if got.Multipath == nil && want.Multipath == nil {
			got.Multipath = nil
		}
		if len(got.Multipath) == 0 {
			got.Multipath = nil
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
		}
		if p, ok := got.Prefix(); !ok || p.Bits() != int(want.DstLen) {
			t.Fatalf("prefix %v %v", p, ok)
		}
	}
}

func TestNexthopRoundTrip(t *testing.T) {
	cases := []Nexthop{
		{Family: AF_INET, Protocol: 11, ID: 6, OIF: 2, Gateway: ip("10.99.0.2")},
		{Family: AF_UNSPEC, ID: 9, Group: []GroupMember{{ID: 6, Weight: 1}, {ID: 7, Weight: 200}}},
		{Family: AF_UNSPEC, ID: 10, Blackhole: true},
		{Family: AF_INET, ID: 11, OIF: 4, Flags: RTNH_F_ONLINK, Gateway: ip("192.0.2.1")},
	}
	for _, want := range cases {
		b := AppendNexthop(nil, RTM_NEWNEXTHOP, NLM_F_REQUEST, 1, &want)
		_, body := oneMessage(t, b)
		var got Nexthop
		if err := got.Decode(body); err != nil {
			t.Fatal(err)
		}
		if len(got.Group) == 0 {
			got.Group = nil
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
		}
	}
}

func TestNeighLinkAddrRoundTrip(t *testing.T) {
	n := Neigh{Family: AF_INET, IfIndex: 3, State: NUD_REACHABLE, Dst: ip("192.0.2.7"),
		LLAddr: [6]byte{2, 0, 0, 0, 0, 7}, HasLLAddr: true}
	_, body := oneMessage(t, AppendNeigh(nil, RTM_NEWNEIGH, 0, 0, &n))
	var gn Neigh
	if err := gn.Decode(body); err != nil || gn != n {
		t.Fatalf("neigh: %+v %v", gn, err)
	}
	l := Link{Index: 5, Flags: IFF_UP | IFF_RUNNING, Name: "eth0"}
	_, body = oneMessage(t, AppendLink(nil, RTM_NEWLINK, 0, 0, &l))
	var gl Link
	if err := gl.Decode(body); err != nil || gl != l {
		t.Fatalf("link: %+v %v", gl, err)
	}
	a := Addr{Family: AF_INET, PrefixLen: 24, Flags: IFA_F_SECONDARY | IFA_F_NOPREFIXROUTE, Index: 5,
		Local: ip("192.0.2.1"), Address: ip("192.0.2.1")}
	_, body = oneMessage(t, AppendAddr(nil, RTM_NEWADDR, 0, 0, &a))
	var ga Addr
	if err := ga.Decode(body); err != nil || ga != a || ga.Prefix() != pfx("192.0.2.1/24") {
		t.Fatalf("addr: %+v %v", ga, err)
	}
}

// Every truncation and a set of corruptions of valid messages: decoding
// returns an *Error or succeeds, and never panics.
func TestMalformed(t *testing.T) {
	r := Route{Family: AF_INET, DstLen: 8, Table: 254, Type: RTN_UNICAST, Dst: ip("10.0.0.0"), Priority: 5, HasPriority: true,
		Multipath: []NextHop{{Weight: 1, OIF: 2, Gateway: ip("192.0.2.1")}, {Weight: 2, OIF: 3}}}
	n := Nexthop{Family: AF_UNSPEC, ID: 9, Group: []GroupMember{{ID: 6, Weight: 1}}}
	for _, msg := range [][]byte{AppendRoute(nil, RTM_NEWROUTE, 0, 0, &r), AppendNexthop(nil, RTM_NEWNEXTHOP, 0, 0, &n)} {
		_, body := oneMessage(t, msg)
		for i := range len(body) {
			var gr Route
			var gn Nexthop
			for _, err := range []error{gr.Decode(body[:i]), gn.Decode(body[:i])} {
				var e *Error
				if err != nil && !errors.As(err, &e) {
					t.Fatalf("truncated at %d: %v is not an *Error", i, err)
				}
			}
			// Corrupt one byte at a time too.
			c := append([]byte(nil), body...)
			c[i] ^= 0xff
			gr.Decode(c)
			gn.Decode(c)
		}
		for i := range len(msg) {
			if _, _, _, err := NextMessage(msg[:i]); err == nil {
				t.Fatalf("NextMessage accepted %d of %d bytes", i, len(msg))
			}
		}
	}
	// Specific errors.
	bad := AppendRoute(nil, RTM_NEWROUTE, 0, 0, &Route{Family: AF_INET, DstLen: 24, Dst: ip("10.0.0.0")})
	_, body := oneMessage(t, bad)
	body[1] = 33
	if err := new(Route).Decode(body); err != ErrPrefixLength {
		t.Fatalf("dst_len 33: %v", err)
	}
	body[1] = 24
	body[SizeofRtMsg] = 7 // RTA_DST length 7: 3 bytes of address
	if err := new(Route).Decode(body); err != ErrAttrLength && err != ErrAddrLength {
		t.Fatalf("short RTA_DST: %v", err)
	}
}

// Decoding into a reused struct allocates nothing.
func TestDecodeAllocs(t *testing.T) {
	r := Route{Family: AF_INET, DstLen: 8, Table: 254, Type: RTN_UNICAST, Dst: ip("10.0.0.0"),
		Multipath: []NextHop{{Weight: 1, OIF: 2, Gateway: ip("192.0.2.1")}, {Weight: 2, OIF: 3}}}
	_, rb := oneMessage(t, AppendRoute(nil, RTM_NEWROUTE, 0, 0, &r))
	n := Nexthop{Family: AF_UNSPEC, ID: 9, Group: []GroupMember{{ID: 6, Weight: 1}, {ID: 7, Weight: 1}}}
	_, nb := oneMessage(t, AppendNexthop(nil, RTM_NEWNEXTHOP, 0, 0, &n))
	var gr Route
	var gn Nexthop
	gr.Decode(rb)
	gn.Decode(nb)
	if a := testing.AllocsPerRun(1000, func() {
		gr.Decode(rb)
		gn.Decode(nb)
	}); a != 0 {
		t.Fatalf("%v allocations per decode", a)
	}
}
