package apply

import (
	"strings"
	"testing"

	"github.com/netfwd/netfwd/fib"
)

// FuzzConfig: any text either loads or is refused with positioned errors;
// never a panic, and a refused text leaves the FIB as it was.
func FuzzConfig(f *testing.F) {
	for _, s := range strings.Split(good, "\n") {
		f.Add(s)
	}
	f.Add(good)
	f.Add("route add 10.0.0.0/8 nexthop via 1.2.3.4 nexthop dev eth0 weight 300")
	f.Add("nexthop add id 1 group 1/1/1\nnexthop replace id 1 blackhole")
	f.Add("address add 0.0.0.0/0 dev x\naddress del 0.0.0.0/0 dev x\nlink set x down\nlink set x up")
	f.Fuzz(func(t *testing.T, text string) {
		fb := fib.New(fib.Options{})
		if err := LoadFIB(fb, "base", strings.NewReader("address add 192.0.2.1/24 dev eth0\nroute add 10.0.0.0/8 via 192.0.2.2\n"), 0); err != nil {
			t.Fatal(err)
		}
		before := dump(fb)
		err := LoadFIB(fb, "fuzz", strings.NewReader(text), 0)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz:") {
				t.Fatalf("error without position: %v", err)
			}
			if dump(fb) != before {
				t.Fatalf("refused text changed the FIB")
			}
		}
	})
}
