package hostpath

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
)

// kernelModel is an interface's IPv4 address list as Linux keeps it with
// promote_secondaries off: an address in a subnet (same length, same
// masked prefix) that already has one is secondary; deleting a primary
// deletes its subnet's secondaries; an existing address cannot be added.
type kernelModel []kernelAddr

func sameSubnet(a, b netip.Prefix) bool { return a.Masked() == b.Masked() }

func (k *kernelModel) add(p netip.Prefix) bool {
	secondary := false
	for _, a := range *k {
		if a.prefix == p {
			return false // EEXIST
		}
		if sameSubnet(a.prefix, p) {
			secondary = true
		}
	}
	*k = append(*k, kernelAddr{prefix: p, secondary: secondary})
	return true
}

func (k *kernelModel) del(p netip.Prefix) bool {
	i := slices.IndexFunc(*k, func(a kernelAddr) bool { return a.prefix == p })
	if i < 0 {
		return false // EADDRNOTAVAIL
	}
	gone := (*k)[i]
	*k = slices.DeleteFunc(*k, func(a kernelAddr) bool {
		return a.prefix == p || !gone.secondary && a.secondary && sameSubnet(a.prefix, p)
	})
	return true
}

// desired is what a twin must show for want: each address, secondary
// unless it is the first of its subnet.
func desired(want []netip.Prefix) map[netip.Prefix]bool {
	out := map[netip.Prefix]bool{}
	for i, p := range want {
		out[p] = slices.ContainsFunc(want[:i], func(q netip.Prefix) bool { return sameSubnet(p, q) })
	}
	return out
}

func randomAddrs(r *rand.Rand) []netip.Prefix {
	var out []netip.Prefix
	for range r.IntN(7) {
		a := netip.AddrFrom4([4]byte{10, 0, byte(r.IntN(2)), byte(1 + r.IntN(5))})
		p := netip.PrefixFrom(a, []int{24, 24, 24, 25, 32}[r.IntN(5)])
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// TestPlanAddrsAgainstKernelModel: from random current address lists
// (built by adding random addresses, as a kernel would have them) to random
// wanted lists, the plan applied to the kernel model succeeds step by step
// and gives exactly the wanted addresses with the wanted primaries; a plan
// from a state that is already right is empty, and nothing wanted is
// deleted unless its subnet's primary had to change.
func TestPlanAddrsAgainstKernelModel(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	for i := range 20000 {
		var k kernelModel
		for _, p := range randomAddrs(r) {
			k.add(p)
		}
		want := randomAddrs(r)
		before := slices.Clone(k)
		del, add := planAddrs(k, want)
		wantPrimary := map[netip.Prefix]netip.Prefix{}
		for _, p := range want {
			if _, ok := wantPrimary[p.Masked()]; !ok {
				wantPrimary[p.Masked()] = p
			}
		}
		for _, p := range del {
			if slices.Contains(want, p) {
				// Only allowed when the subnet's primary was wrong.
				for _, a := range before {
					if !a.secondary && sameSubnet(a.prefix, p) && wantPrimary[p.Masked()] == a.prefix {
						t.Fatalf("case %d: %v deleted although its subnet's primary %v is right", i, p, a.prefix)
					}
				}
			}
			if !k.del(p) {
				t.Fatalf("case %d: plan deletes %v, which is not there (from %v to %v)", i, p, before, want)
			}
		}
		for _, p := range add {
			if !k.add(p) {
				t.Fatalf("case %d: plan adds %v, which exists (from %v to %v)", i, p, before, want)
			}
		}
		got := map[netip.Prefix]bool{}
		for _, a := range k {
			got[a.prefix] = a.secondary
		}
		wantState := desired(want)
		if len(got) != len(wantState) {
			t.Fatalf("case %d: from %v to %v gave %v", i, before, want, k)
		}
		for p, sec := range wantState {
			if gs, ok := got[p]; !ok || gs != sec {
				t.Fatalf("case %d: from %v to %v gave %v (%v: secondary %v, want %v)", i, before, want, k, p, gs, sec)
			}
		}
		if d, a := planAddrs(k, want); len(d)+len(a) != 0 {
			t.Fatalf("case %d: plan from the right state is not empty: del %v add %v", i, d, a)
		}
	}
}

func TestCheckAddrs(t *testing.T) {
	p := netip.MustParsePrefix
	for _, bad := range [][]netip.Prefix{
		{p("2001:db8::1/64")},
		{p("10.0.0.1/24"), p("10.0.0.1/24")},
		{{}},
		{netip.PrefixFrom(netip.MustParseAddr("::ffff:10.0.0.1"), 24)},
	} {
		if checkAddrs(bad) == nil {
			t.Errorf("checkAddrs(%v) accepted", bad)
		}
	}
	if err := checkAddrs([]netip.Prefix{p("10.0.0.1/24"), p("10.0.0.1/25"), p("192.0.2.1/32")}); err != nil {
		t.Error(err)
	}
}

func TestLastAddr(t *testing.T) {
	for in, want := range map[string]string{"10.1.2.3/24": "10.1.2.255", "10.1.2.3/30": "10.1.2.3", "10.0.0.0/8": "10.255.255.255", "10.1.2.3/32": "10.1.2.3", "0.0.0.0/0": "255.255.255.255"} {
		if got := lastAddr(netip.MustParsePrefix(in)); got.String() != want {
			t.Errorf("lastAddr(%s) = %v, want %s", in, got, want)
		}
	}
}
