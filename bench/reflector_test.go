package bench

import (
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/pktio/afxdp"
	"github.com/netfwd/netfwd/internal/testenv"
)

// BenchmarkReflector measures the AF_XDP reflector with the backend's
// knobs varied (spin before blocking, batch size, transmit budget, generic
// instead of native XDP), in both
// set-ups of the veth suite; each iteration is one run of 1,000,000 frames
// from trafgen. Metrics: delivered Mpps and the CPU time of trafgen, the
// reflector's thread and ksoftirqd per frame (the processes involved, so
// other jobs on the machine do not count).
//
//	sudo go test -run X -bench Reflector -benchtime 3x ./bench
func BenchmarkReflector(b *testing.B) {
	testenv.RequireRoot(b, "trafgen")
	n, err := newVethNet(countAtH2, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer n.close()
	variants := []struct {
		name string
		cfg  reflectorConfig
	}{
		{"spin0", reflectorConfig{worker: afxdp.WorkerConfig{Spin: -1}}},
		{"spin50us", reflectorConfig{}}, // the defaults
		{"spin1ms", reflectorConfig{worker: afxdp.WorkerConfig{Spin: time.Millisecond}}},
		{"batch64", reflectorConfig{batch: 64}},
		{"budget32", reflectorConfig{worker: afxdp.WorkerConfig{TxBudget: 32}}},
		{"generic", reflectorConfig{port: afxdp.PortConfig{Attach: afxdp.AttachGeneric}}},
	}
	for _, setup := range vethSetups() {
		for _, v := range variants {
			b.Run(setup.name+"/"+v.name, func(b *testing.B) {
				var pps, cpu float64
				for range b.N {
					r, err := startReflector(n.r, n.ra, n.rb, n.h2MAC, setup.cpu, v.cfg)
					if err != nil {
						b.Fatal(err)
					}
					_, err = n.measure(genSpec{frames: 20_000, procs: 1, warmup: true}, nil)
					var m runResult
					if err == nil {
						m, err = n.measure(genSpec{frames: 1_000_000, procs: setup.procs}, r.cpu)
					}
					if serr := r.stop(); err == nil {
						err = serr
					}
					if err != nil {
						b.Fatal(err)
					}
					if m.delivered == 0 {
						b.Fatalf("nothing delivered: %v", m)
					}
					pps += m.pps()
					cpu += perFrame(m.procCPU, m.delivered)
				}
				b.ReportMetric(pps/float64(b.N)/1e6, "Mpps")
				b.ReportMetric(cpu/float64(b.N), "procs-ns/frame")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}
