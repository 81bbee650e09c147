package afxdp

// The test bench (pktiotest) and the AF_PACKET ports the tests use as the
// other end of a veth.

import (
	"net"
	"testing"

	"github.com/netfwd/netfwd/internal/pktio/afpacket"
	"github.com/netfwd/netfwd/internal/pktio/pktiotest"
)

// openIn opens an AF_PACKET port in ns, closed when the test ends.
func openIn(t testing.TB, ns, iface string, cfg afpacket.Config) (p *afpacket.Port) {
	t.Helper()
	pktiotest.Do(t, ns, func() (err error) { p, err = afpacket.Open(iface, cfg); return err })
	t.Cleanup(func() { p.Shutdown(); p.Close() })
	return p
}

// newUDPSender sends UDP frames from iface in ns through the qdisc layer.
func newUDPSender(t testing.TB, ns, iface string, dst net.HardwareAddr, flows int) *pktiotest.UDPSender {
	t.Helper()
	p := openIn(t, ns, iface, afpacket.Config{NotPromiscuous: true, NoQdiscBypass: true})
	tx, err := p.NewTx()
	if err != nil {
		t.Fatal(err)
	}
	return pktiotest.NewUDPSender(tx, dst, p.MAC, flows)
}
