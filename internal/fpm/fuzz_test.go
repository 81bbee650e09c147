package fpm

import (
	"errors"
	"net/netip"
	"os"
	"testing"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/rtnl"
)

// FuzzFrames feeds arbitrary bytes to the frame decoder and the translator
// as the server does (a frame applies only if it decoded whole). Nothing
// may panic, every decoding error must be a counted *rtnl.Error, the FIB's
// one-pointer lookup must agree with its full route lookup on every
// learned prefix, and dropping the session must leave no nexthop behind.
func FuzzFrames(f *testing.F) {
	for _, file := range []string{"zebra-8.4.4-nhg.fpm", "zebra-8.4.4-nonhg.fpm"} {
		if b, err := os.ReadFile("testdata/" + file); err == nil {
			f.Add(b)
		}
	}
	var b []byte
	b = AppendNexthop(b, &rtnl.Nexthop{Family: rtnl.AF_INET, ID: 1, OIF: 2, Gateway: netip.MustParseAddr("192.0.2.1")}, false)
	b = AppendNexthop(b, &rtnl.Nexthop{ID: 10, Group: []rtnl.GroupMember{{ID: 1, Weight: 1}}}, false)
	b = AppendNewRoute(b, &ZebraRoute{Prefix: netip.MustParsePrefix("10.1.0.0/16"), Metric: 20, NHID: 10})
	b = AppendNewRoute(b, &ZebraRoute{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Metric: 20, Paths: []rtnl.NextHop{
		{Weight: 1, OIF: 2, Gateway: netip.MustParseAddr("192.0.2.3")}, {Weight: 1, OIF: 3}}})
	b = AppendDelRoute(b, &ZebraRoute{Prefix: netip.MustParsePrefix("10.1.0.0/16"), Metric: 20})
	b = AppendNexthop(b, &rtnl.Nexthop{ID: 1}, true)
	f.Add(b)
	f.Add([]byte{1, 1, 0, 4, 1, 1, 0, 3})

	f.Fuzz(func(t *testing.T, data []byte) {
		fb := fib.New(fib.Options{})
		tr := NewTranslator(fib.OwnerFPM, 1, ifaces, nil)
		tr.KeepKernelProto = true
		// every table, the default
		var fr Frame
		for b := data; len(b) > 0; {
			typ, payload, n, err := NextFrame(b)
			if err != nil {
				var e *rtnl.Error
				if !errors.As(err, &e) {
					t.Fatalf("frame error %v is not an *rtnl.Error", err)
				}
				break
			}
			if n == 0 {
				break
			}
			b = b[n:]
			if typ != TypeNetlink {
				continue
			}
			if err := fr.Decode(payload); err != nil {
				var e *rtnl.Error
				if !errors.As(err, &e) {
					t.Fatalf("decode error %v is not an *rtnl.Error", err)
				}
				break // the server closes the connection here
			}
			tx := fb.Begin(1)
			tr.ApplyFrame(tx, &fr)
			tx.Commit()
		}
		for _, r := range fb.Routes(fib.TableAll) {
			if r.Table != fib.TableMain && r.Table != fib.TableLocal {
				continue
			}
			for _, a := range []netip.Addr{r.Prefix.Addr(), fib.LastAddr(r.Prefix)} {
				var want any
				if res, ok := fb.LookupRoute(a); ok && res.Route.Type != fib.Throw {
					want = res.Route.NH
				}
				got := fb.Lookup(a)
				if want == nil && got != nil || want != nil && want != any(got) {
					t.Fatalf("%s: lookup %v, route lookup %v", a, got, want)
				}
			}
		}
		tx := fb.Begin(1)
		tr.Close(tx)
		tx.DropLearned(fib.OwnerFPM)
		tx.Commit()
		tx = fb.Begin(1)
		if n := tx.Nexthops().Len(); n != 0 {
			t.Fatalf("%d nexthops left after the session and its routes are gone", n)
		}
		tx.Abort()
	})
}
