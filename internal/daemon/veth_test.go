package daemon

// The daemon on pktio's benchmark topology (S --veth-- F --veth-- D): the
// I/O loop's allocations, and the forwarding rate of 64-byte UDP.
//
//	sudo go test -run XXX -bench DaemonVeth -benchtime 3x ./internal/daemon

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/internal/testenv"
	"github.com/netfwd/netfwd/internal/vethlab"
	"github.com/netfwd/netfwd/l3"
)

// vethDaemon builds the topology with the daemon's config in F: fa and fb
// routed, a permanent neighbour for the sink's address (as the Linux
// baseline has), frames from S addressed to the router's MAC of fa.
func vethDaemon(t testing.TB, workers int) (*vethlab.Topology, *Daemon) {
	t.Helper()
	testenv.RequireRoot(t)
	vb, err := vethlab.NewTopology(vethlab.External)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vb.Close() })
	dir := t.TempDir()
	conf := filepath.Join(dir, "veth.conf")
	lines := "address add 10.81.1.1/24 dev " + vb.FA + "\n" +
		"address add 10.81.2.1/24 dev " + vb.FB + "\n" +
		"neigh add " + vethlab.DstIP.String() + " lladdr " + vethlab.FinalMAC.String() + " dev " + vb.FB + "\n"
	if err := os.WriteFile(conf, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	// S needs no ARP: the blaster writes the router's MAC itself.
	d, err := New(Options{ConfigFile: conf, Netns: vb.F, Workers: workers, IO: "afpacket",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	// Freshly made veths may not report carrier yet when the ports open;
	// Run's link monitor would catch up, tests without Run say it here.
	for _, n := range []string{vb.FA, vb.FB} {
		if _, err := d.Controller().SetCarrier(n, true); err != nil {
			t.Fatal(err)
		}
	}
	mac := l3.DefaultMAC(vb.FA)
	vb.BlastMAC = mac[:]
	return vb, d
}

// The worker loop allocates nothing per batch: blast, Recv, engine, Send.
func TestWorkerLoopAllocs(t *testing.T) {
	vb, d := vethDaemon(t, 1)
	defer d.Close()
	var bl *vethlab.Blaster
	if err := pktio.InNetns(vb.S, func() error {
		var err error
		bl, err = vethlab.NewBlaster(vethlab.BlasterConfig{Iface: vb.S0, DstMAC: vb.BlastMAC, Batch: 32,
			SrcIP: vethlab.SrcIP, DstIP: vethlab.DstIP, SrcPort: 1000, Flows: 8})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer bl.Close()
	p := d.ports.Load().byName(vb.FA)
	iw := d.workers[0] // bound to every port by New
	q := p.pk.Queue(0)
	step := func() {
		if _, err := bl.Send(32); err != nil {
			t.Fatal(err)
		}
		n, err := q.Recv(iw.frames, iw.meta)
		if err != nil {
			t.Fatal(err)
		}
		iw.batch(p, n)
	}
	for range 5 { // transmit handles, engine scratch, neighbour entry
		step()
	}
	before := d.Engine().Stats().Forwarded
	allocs := testing.AllocsPerRun(100, step)
	if allocs != 0 {
		t.Errorf("%v allocations per batch, want 0", allocs)
	}
	if fwd := d.Engine().Stats().Forwarded - before; fwd < 100*16 {
		t.Errorf("forwarded %d frames in the measured batches, want most of %d", fwd, 101*32)
	}
	if sent := d.ports.Load().byName(vb.FB).stats().Tx.Packets; sent < 100*16 {
		t.Errorf("%d frames left on %s", sent, vb.FB)
	}
}

// The daemon against Linux forwarding on the same topology is measured by
// `netfwd-bench veth` and BenchmarkVeth in package bench.
