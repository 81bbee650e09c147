package bench

// What a VRF costs in memory (issue 29: a VRF of a few routes must not cost
// a full DIR-24-8 table; target <= 1 MiB for a VRF of <= 1,000 routes in
// compiled mode). Only the merged local+main trie has a compiled table; a
// VRF's table is a route trie like any numbered table.

import (
	"fmt"
	"net/netip"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/wire"
)

// vrfRoutes is how many routes each VRF's table gets besides the ones its
// device's address derives.
const vrfRoutes = 1000

// addVRF adds VRF vrf<i> on table 100+i with one port (vrf<i>-p0, up,
// enslaved, 192.0.2.1/24: the same subnet in every VRF and in main) and
// vrfRoutes /24s from 100.64.0.0/10 through four gateways on that subnet.
func addVRF(f *fib.FIB, i int) error {
	name, dev, table := fmt.Sprintf("vrf%d", i), fmt.Sprintf("vrf%d-p0", i), uint32(100+i)
	tx := f.Begin(vrfRoutes + 4)
	err := func() error {
		if err := tx.SetLinkUp(dev, true); err != nil {
			return err
		}
		if err := tx.AddVRF(name, table); err != nil {
			return err
		}
		if err := tx.SetMaster(dev, name); err != nil {
			return err
		}
		if err := tx.AddAddress(dev, netip.MustParsePrefix("192.0.2.1/24")); err != nil {
			return err
		}
		for j := range vrfRoutes {
			p := netip.PrefixFrom(netip.AddrFrom4([4]byte{100, byte(64 + j>>8), byte(j), 0}), 24)
			gw := netip.AddrFrom4([4]byte{192, 0, 2, byte(250 + j%4)})
			if err := tx.AddRoute(fib.RouteSpec{Prefix: p, Table: table, Gateway: gw, Dev: dev, Proto: fib.ProtoBGP}); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
		}
		return nil
	}()
	if err != nil {
		tx.Abort()
		return err
	}
	tx.Commit()
	return nil
}

// heapInUse is the live heap after two collections.
func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// TestMemoryVRF: a compiled-mode FIB with the full table in main; one VRF
// of 1,000 routes grows the live heap by at most 1 MiB, and ten VRFs by at
// most 10 MiB. Not timed. Runs in .ci/run's no-race step (TestMemory*):
// under the race detector it skips, as the other memory tests do.
func TestMemoryVRF(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the full table in compiled mode")
	}
	if raceBuild() {
		t.Skip("race detector: memory not asserted (.ci/run runs this test without it)")
	}
	s, err := NewFIBSetup(0, 1<<10)
	if err != nil {
		t.Skip(err)
	}
	f, err := s.BuildCompiledFIB()
	if err != nil {
		t.Fatal(err)
	}
	base := heapInUse()
	if err := addVRF(f, 0); err != nil {
		t.Fatal(err)
	}
	one := heapInUse() - base
	for i := 1; i < 10; i++ {
		if err := addVRF(f, i); err != nil {
			t.Fatal(err)
		}
	}
	ten := heapInUse() - base
	// The VRFs work: a route of VRF 3's table answers a flow of VRF 3.
	k := fib.Flow{Dst: wire.Addr4From(netip.MustParseAddr("100.64.3.7")), IIF: f.DevIndex("vrf3"), L3mdev: 103}
	if nh := f.LookupFlow(&k); nh == nil || nh.Dev != "vrf3-p0" {
		t.Fatalf("VRF 3: 100.64.3.7 via %v", nh)
	}
	if n := len(f.Routes(103)); n < vrfRoutes {
		t.Fatalf("table 103 has %d routes", n)
	}
	runtime.KeepAlive(f)
	t.Logf("compiled FIB, %d routes in main: one VRF of %d routes +%.1f KiB of live heap (%.0f bytes a route); ten VRFs +%.1f KiB (%.1f KiB a VRF)",
		len(s.Main), vrfRoutes, float64(one)/1024, float64(one)/vrfRoutes, float64(ten)/1024, float64(ten)/10/1024)
	if one > 1<<20 {
		t.Errorf("one VRF of %d routes costs %.2f MiB, want <= 1 MiB", vrfRoutes, float64(one)/(1<<20))
	}
	if ten > 10<<20 {
		t.Errorf("ten VRFs of %d routes cost %.2f MiB, want <= 10 MiB", vrfRoutes, float64(ten)/(1<<20))
	}
}

// raceBuild reports whether this test binary has the race detector.
func raceBuild() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}
