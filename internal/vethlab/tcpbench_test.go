package pktio

import (
	"encoding/json"
	"os/exec"
	"testing"
	"time"
)

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
// go test -run X -bench TCPIperf3 -benchtime=3x ./internal/pktio
func BenchmarkTCPIperf3(b *testing.B) {
	requireRoot(b)
	if _, err := exec.LookPath("iperf3"); err != nil {
		b.Skip("iperf3 not installed (apt-get install iperf3)")
	}
	cases := []struct {
		name string
		cfg  *Config // nil: Linux bridge
	}{
		{"linux-bridge", nil},
		{"pktio-1q", &Config{}},
		{"pktio-2q", &Config{Queues: 2}},
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
				_, _, stop = c.startL2Forwarder(b, *tc.cfg)
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
