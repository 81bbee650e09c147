package main

// Bursts into a router that is not draining: the receive rings must hold a
// burst of one flow that is longer than one queue's ring (issue 27: a paced
// trafgen sends its frames back to back, one flow lands on one queue, and
// a worker can be off its CPU for milliseconds), and a burst longer than
// all of them must be visible where operators look: ring drops, the
// overflow counter and a log line.
//
// The daemon is stopped (SIGSTOP) while trafgen sends the burst, so what
// is measured is the rings' depth, not the machine's speed: no pass
// condition depends on timing.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/lab"
	"github.com/netfwd/netfwd/internal/testenv"
)

// absorbedBurst is a one-flow burst every default set-up must hold without
// a worker reading: more than one V2 queue held before rollover and the
// denser slots (2,048), less than what one flow now has with two queues
// (4,480: its own ring and three quarters of the sibling's; AF_XDP: a
// 4,096-frame fill ring).
const absorbedBurst = 3500

func TestE2EBurstAbsorbed(t *testing.T) {
	testenv.RequireRoot(t, "trafgen", "ping")
	if runtime.NumCPU() < 2 {
		t.Skip("one CPU: one queue a port, the ring of one queue is all a flow has")
	}
	e := newE2EExe(t, lab.Standard(), nil, optimizedNetfwd(t))
	isp, h3 := e.host("isp"), e.host("h3")
	e.pingOK("isp", h3IP, 63) // the router resolves h3 first
	conf := filepath.Join(t.TempDir(), "burst.trafgen")
	// One flow (fixed ports): the fanout hash puts every frame on one queue.
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`{
  eth(da=%s, sa=%s),
  ipv4(saddr=%s, daddr=%s, ttl=64),
  udp(sp=10000, dp=9),
  fill(0x00, 18)
}
`, isp.RouterMAC, isp.MAC, isp.Addr.Addr(), h3IP)), 0o644); err != nil {
		t.Fatal(err)
	}
	pid := e.cmd.Process.Pid // ip netns exec execs netfwd: this is the daemon
	burst := func(frames int) (delivered int64) {
		t.Helper()
		before := kernelCounter(t, h3.NS, "Udp", "NoPorts")
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("ip", "netns", "exec", isp.NS, "trafgen", "--dev", isp.Iface, "--conf", conf,
			"-n", strconv.Itoa(frames), "--no-sock-mem", "-P", "1", "-q").CombinedOutput()
		syscall.Kill(pid, syscall.SIGCONT)
		if err != nil {
			t.Fatalf("trafgen: %v\n%s", err, out)
		}
		// Drained when h3's count stops moving.
		last, still := int64(-1), 0
		for range 100 {
			n := kernelCounter(t, h3.NS, "Udp", "NoPorts") - before
			if n == last {
				if still++; still == 5 {
					break
				}
			} else {
				still = 0
			}
			last = n
			time.Sleep(50 * time.Millisecond)
		}
		return last
	}
	drops0 := e.scrape().Sum("netfwd_pktio_ring_drops_total", "port", "eth0")
	if got := burst(absorbedBurst); got != absorbedBurst {
		t.Errorf("a one-flow burst of %d frames into a stopped daemon: h3 received %d (ring drops %v)",
			absorbedBurst, got, e.scrape().Sum("netfwd_pktio_ring_drops_total", "port", "eth0")-drops0)
	}
	m := e.scrape()
	if d := m.Sum("netfwd_pktio_ring_drops_total", "port", "eth0") - drops0; d != 0 {
		t.Errorf("ring drops %v on eth0 for a burst the rings hold", d)
	}
	if testIO() != "afxdp" {
		if r := m.Sum("netfwd_pktio_rollover_total", "port", "eth0"); r == 0 {
			t.Errorf("no frame rolled over to the second queue: one queue cannot hold %d frames", absorbedBurst)
		}
	}

	// A burst no default ring holds: lost, and said so.
	const overflow = 12000
	got := burst(overflow)
	m = e.scrape()
	drops := m.Sum("netfwd_pktio_ring_drops_total", "port", "eth0") - drops0
	if drops == 0 || got >= overflow {
		t.Fatalf("a burst of %d frames into a stopped daemon: %d delivered, %v ring drops; want drops", overflow, got, drops)
	}
	if int64(drops)+got < overflow {
		t.Errorf("%d delivered + %v ring drops < %d sent: frames lost where no counter says", got, drops, overflow)
	}
	ok, why := eventually(5*time.Second, func() (bool, string) {
		if n := e.scrape().Sum("netfwd_pktio_ring_overflows_total", "port", "eth0"); n < 1 {
			return false, fmt.Sprintf("netfwd_pktio_ring_overflows_total{port=eth0} = %v", n)
		}
		if log := e.stderr.String(); !strings.Contains(log, "receive ring overflowed") || !strings.Contains(log, "port=eth0") {
			return false, "no overflow line in the log"
		}
		return true, ""
	})
	if !ok {
		t.Errorf("overflow not reported: %s\n%s", why, lastBytes(e.stderr.String(), 2000))
	}
}
