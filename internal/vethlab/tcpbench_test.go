package vethlab

import (
	"encoding/json"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/internal/pktio/afpacket"
	"github.com/netfwd/netfwd/internal/testenv"
)

// chain is h1 -- (f1) F (f2) -- h2: two host namespaces and a forwarding
// namespace in the middle, hosts on one subnet.
type chain struct {
	lab            *Lab
	h1, f, h2      string
	h1if, f1, f2   string
	h2if           string
	h1addr, h2addr string
}

func newChain(tb testing.TB) *chain {
	tb.Helper()
	l, err := NewLab()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	c := &chain{lab: l, h1addr: "10.78.0.1", h2addr: "10.78.0.2"}
	must := func(err error) {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
	}
	c.h1, err = l.AddNetns("h1")
	must(err)
	c.f, err = l.AddNetns("f")
	must(err)
	c.h2, err = l.AddNetns("h2")
	must(err)
	c.h1if, c.f1, err = l.AddVeth(c.h1, "h1", c.f, "f1")
	must(err)
	c.f2, c.h2if, err = l.AddVeth(c.f, "f2", c.h2, "h2")
	must(err)
	must(l.IP(c.h1, "addr", "add", c.h1addr+"/24", "dev", c.h1if))
	must(l.IP(c.h2, "addr", "add", c.h2addr+"/24", "dev", c.h2if))
	return c
}

// startL2Forwarder runs the trivial forwarder both ways between f1 and f2.
func (c *chain) startL2Forwarder(tb testing.TB, cfg afpacket.Config) (stop func() error) {
	tb.Helper()
	var a, b *afpacket.Port
	err := pktio.InNetns(c.f, func() error {
		var err error
		if a, err = afpacket.Open(c.f1, cfg); err != nil {
			return err
		}
		b, err = afpacket.Open(c.f2, cfg)
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	var fw forwarder
	for i := range a.Queues() {
		ta, err := a.NewTx()
		if err != nil {
			tb.Fatal(err)
		}
		tx, err := b.NewTx()
		if err != nil {
			tb.Fatal(err)
		}
		fw.start(a.Queue(i), tx, 256)
		fw.start(b.Queue(i), ta, 256)
	}
	var once sync.Once
	stop = func() error {
		once.Do(func() {
			a.Shutdown()
			b.Shutdown()
			err = fw.wait()
			a.Close()
			b.Close()
		})
		return err
	}
	tb.Cleanup(func() { stop() })
	return stop
}

// iperf3 runs an iperf3 TCP test h1 -> h2 for d and returns bits/s.
func iperf3(tb testing.TB, c *chain, d time.Duration) float64 {
	tb.Helper()
	srv := exec.Command("ip", "netns", "exec", c.h2, "iperf3", "-s", "-1", "-B", c.h2addr)
	if err := srv.Start(); err != nil {
		tb.Fatal(err)
	}
	defer func() { srv.Process.Kill(); srv.Wait() }()
	var out []byte
	var err error
	for range 20 { // until the server listens
		time.Sleep(100 * time.Millisecond)
		out, err = c.lab.Exec(c.h1, "iperf3", "-c", c.h2addr, "-t", d.String()[:len(d.String())-1], "-J")
		if err == nil {
			break
		}
	}
	if err != nil {
		tb.Fatal(err)
	}
	var r struct {
		End struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		tb.Fatalf("iperf3 output: %v: %s", err, out)
	}
	return r.End.SumReceived.BitsPerSecond
}

// BenchmarkTCPIperf3: iperf3 TCP through F, forwarded by a Linux bridge or
// by the trivial pktio forwarder (GSO super-frames passed through), on the
// same topology in the same run. Metric: Gbit/s received.
// go test -run X -bench TCPIperf3 -benchtime=3x ./internal/vethlab
func BenchmarkTCPIperf3(b *testing.B) {
	testenv.RequireRoot(b, "iperf3")
	cases := []struct {
		name string
		cfg  *afpacket.Config // nil: Linux bridge
	}{
		{"linux-bridge", nil},
		{"pktio-1q", &afpacket.Config{}},
		{"pktio-2q", &afpacket.Config{Queues: 2}},
	}
	res := make([][]float64, len(cases))
	for range b.N {
		for i, tc := range cases {
			c := newChain(b)
			var stop func() error
			if tc.cfg == nil {
				br := c.lab.Name("br")
				for _, args := range [][]string{
					{"link", "add", br, "type", "bridge"},
					{"link", "set", c.f1, "master", br},
					{"link", "set", c.f2, "master", br},
					{"link", "set", br, "up"},
				} {
					if err := c.lab.IP(c.f, args...); err != nil {
						b.Fatal(err)
					}
				}
			} else {
				stop = c.startL2Forwarder(b, *tc.cfg)
			}
			bps := iperf3(b, c, 3*time.Second)
			if stop != nil {
				if err := stop(); err != nil {
					b.Fatal(err)
				}
			}
			b.Logf("%-12s %.2f Gbit/s", tc.name, bps/1e9)
			res[i] = append(res[i], bps/1e9)
		}
	}
	base := median(res[0])
	for i, tc := range cases {
		b.ReportMetric(median(res[i]), tc.name+"_Gbps")
		if base > 0 {
			b.ReportMetric(median(res[i])/base, tc.name+"_x_linux")
		}
	}
	b.ReportMetric(0, "ns/op")
}
