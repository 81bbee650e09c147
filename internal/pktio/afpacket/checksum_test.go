package afpacket

import (
	"net"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/internal/pktio/pktiotest"
)

// TestRecvCompletesPartialChecksums: UDP and TCP from a host namespace leave
// with CHECKSUM_PARTIAL (veth checksum offload); Recv hands them over valid.
func TestRecvCompletesPartialChecksums(t *testing.T) {
	for _, cfg := range []Config{{}, {NoOffload: true}} {
		name := "vnet"
		if cfg.NoOffload {
			name = "parse"
		}
		t.Run(name, func(t *testing.T) {
			p := pktiotest.NewPair(t)
			port := openIn(t, p.NsB, p.B, cfg)
			pktiotest.IP(t, p.NsA, "addr", "add", "10.77.0.1/24", "dev", p.A)
			pktiotest.IP(t, p.NsA, "neigh", "add", "10.77.0.2", "lladdr", port.MAC.String(), "dev", p.A, "nud", "permanent")
			err := pktio.InNetns(p.NsA, func() error {
				c, err := net.Dial("udp", "10.77.0.2:9999")
				if err != nil {
					return err
				}
				defer c.Close()
				for _, n := range []int{1, 100, 1000} {
					if _, err := c.Write(make([]byte, n)); err != nil {
						return err
					}
				}
				d := net.Dialer{Timeout: 200 * time.Millisecond}
				if c, err := d.Dial("tcp", "10.77.0.2:80"); err == nil {
					c.Close()
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			got, meta := pktiotest.RecvN(t, port.Queue(0), 4, 2*time.Second)
			if len(got) < 4 {
				t.Fatalf("received %d frames, want 4", len(got))
			}
			for i, f := range got {
				if !pktiotest.RefL4Valid(t, f) {
					t.Errorf("frame %d: invalid L4 checksum: %x", i, f)
				}
				if meta[i].Flags&pktio.FlagChecksumCompleted == 0 || meta[i].Flags&pktio.FlagChecksumPartial != 0 {
					t.Errorf("frame %d flags %#x", i, meta[i].Flags)
				}
			}
			if st := port.Stats().Rx; st.ChecksumCompleted < 4 || st.ChecksumUnfixed != 0 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}
