package main

// Live capture end to end: `netfwd ctl capture` streams a port's frames as
// pcap that pcapgo and a real tcpdump read; frames in both directions, VLAN
// tags as on the wire, a tcpdump filter, and a reader that stops reading
// costs the forwarding nothing.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	"github.com/netfwd/netfwd/internal/ctlsock"
	"github.com/netfwd/netfwd/internal/lab"
	"github.com/netfwd/netfwd/internal/testenv"
)

// captureCtl runs `netfwd ctl capture ...` in the background; wait returns
// its pcap, its stderr and exit status.
func (e *e2e) captureCtl(line string) (wait func() ([]byte, string, int)) {
	var out, errb bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- dispatch([]string{"ctl", "--ctl", e.CtlPath, line}, strings.NewReader(""), &out, &errb)
	}()
	// The session is registered when the pcap header arrives.
	time.Sleep(300 * time.Millisecond)
	return func() ([]byte, string, int) {
		select {
		case code := <-done:
			return out.Bytes(), errb.String(), code
		case <-time.After(15 * time.Second):
			e.t.Fatalf("capture %q did not end", line)
			return nil, "", 0
		}
	}
}

func readCapture(t *testing.T, b []byte) []gopacket.Packet {
	t.Helper()
	r, err := pcapgo.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not a pcap (%d bytes): %v", len(b), err)
	}
	if r.LinkType() != layers.LinkTypeEthernet {
		t.Fatalf("link type %v", r.LinkType())
	}
	var ps []gopacket.Packet
	for {
		data, ci, err := r.ReadPacketData()
		if err != nil {
			break
		}
		if ci.CaptureLength != len(data) || ci.Length < ci.CaptureLength {
			t.Errorf("capture info %+v for %d bytes", ci, len(data))
		}
		ps = append(ps, gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.Default))
	}
	return ps
}

// TestE2ECapture: pings through the uplink captured in both directions
// with a filter; tagged frames on a trunk captured with their tag; the
// pcap read by tcpdump itself.
func TestE2ECapture(t *testing.T) {
	testenv.RequireRoot(t, "tcpdump")
	e := newE2E(t, taggedSpec(), nil)
	e.pingOK("h1", lab.InternetIP, 63) // neighbours resolved: only the pings are left

	// Both directions on the routed uplink, ICMP only.
	wait := e.captureCtl("capture eth0 count 6 filter icmp")
	e.pingOK("h1", lab.InternetIP, 63)
	pcap, stderr, code := wait()
	if code != 0 {
		t.Fatalf("capture exit %d: %s", code, stderr)
	}
	ps := readCapture(t, pcap)
	var req, rep int
	for _, p := range ps {
		ip, _ := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		ic, _ := p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
		if ip == nil || ic == nil {
			t.Errorf("not ICMP: %v", p)
			continue
		}
		switch {
		case ic.TypeCode.Type() == layers.ICMPv4TypeEchoRequest && ip.DstIP.String() == lab.InternetIP.String() && ip.TTL == 63:
			req++ // as sent: routed, TTL decremented
		case ic.TypeCode.Type() == layers.ICMPv4TypeEchoReply && ip.SrcIP.String() == lab.InternetIP.String() && ip.TTL == 64:
			rep++ // as received
		}
	}
	if len(ps) != 6 || req != 3 || rep != 3 {
		t.Errorf("captured %d frames, %d echo requests out and %d replies in; want 6, 3, 3", len(ps), req, rep)
	}
	if !strings.Contains(stderr, "6 frames captured, 0 dropped") {
		t.Errorf("capture's note: %q", stderr)
	}

	// Out only, on the trunk: the echo requests h1 -> trunk host, tagged.
	tr := e.net.Trunk("t1")
	th, err := lab.StartRawHost(tr.NS, tr.Iface, lab.RawHostConfig{MAC: trunkMAC, Addrs: []lab.RawAddr{{VID: 10, IP: t10IP}}})
	if err != nil {
		t.Fatal(err)
	}
	defer th.Close()
	wait = e.captureCtl("capture eth4 out count 2 filter vlan 10 and icmp")
	e.ping("h1", t10IP, lab.PingOptions{Count: 2})
	pcap, stderr, code = wait()
	if code != 0 {
		t.Fatalf("trunk capture exit %d: %s", code, stderr)
	}
	for _, p := range readCapture(t, pcap) {
		d, _ := p.Layer(layers.LayerTypeDot1Q).(*layers.Dot1Q)
		if d == nil || d.VLANIdentifier != 10 {
			t.Errorf("a frame sent on the trunk without its tag 10: %v", p)
		}
	}

	// A real tcpdump reads the stream from a pipe.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sh := exec.Command("sh", "-c", exe+" ctl --ctl "+e.CtlPath+" capture eth0 count 2 filter icmp | tcpdump -r - -n -e")
	sh.Env = append(os.Environ(), "NETFWD_TEST_MAIN=1")
	var tdOut bytes.Buffer
	sh.Stdout, sh.Stderr = &tdOut, &tdOut
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	e.pingOK("h1", lab.InternetIP, 63)
	if err := sh.Wait(); err != nil {
		t.Fatalf("capture | tcpdump: %v\n%s", err, tdOut.String())
	}
	if !strings.Contains(tdOut.String(), "ICMP echo request") || !strings.Contains(tdOut.String(), "ICMP echo reply") {
		t.Errorf("tcpdump read:\n%s", tdOut.String())
	}

	// Errors: a device that is not a port, a bad filter.
	var ob, eb bytes.Buffer
	if code := dispatch([]string{"ctl", "--ctl", e.CtlPath, "capture vlan10"}, strings.NewReader(""), &ob, &eb); code == 0 ||
		!strings.Contains(eb.String(), "not a port") {
		t.Errorf("capture vlan10: exit %d, %q", code, eb.String())
	}
	eb.Reset()
	if code := dispatch([]string{"ctl", "--ctl", e.CtlPath, "capture eth0 filter nosuchproto"}, strings.NewReader(""), &ob, &eb); code == 0 ||
		!strings.Contains(eb.String(), "nosuchproto") {
		t.Errorf("capture with a bad filter: exit %d, %q", code, eb.String())
	}
}

// TestE2ECaptureStalledReader: a capture whose client stops reading while
// 20 kpps cross the port: every datagram is delivered, the capture drops
// are counted (the daemon's log) and the capture ends when the client goes.
func TestE2ECaptureStalledReader(t *testing.T) {
	rate, total := 20000, 40000
	if v := os.Getenv("NETFWD_CAPTURE_RATE"); v != "" { // by hand: at 50 % of saturation
		fmt.Sscan(v, &rate)
		total = 2 * rate
	}
	exe := optimizedNetfwd(t)
	e := newE2EExe(t, attackNet(), nil, exe)
	e.pingOK("a", attackBIP, 63)
	b := e.host("b")
	// A bound socket at b through the baseline window: no ICMP port
	// unreachable (nor ARP) from b; the counting one comes after.
	rx := startUDPCounter(t, b.NS, 9000, 0)
	rxPackets := func() uint64 { return ifaceRxPackets(t, b.NS, b.Iface) }
	aMAC, _ := net.ParseMAC(attackMACa)
	template := lab.UDPFrame(attackMACpa, aMAC, 0, attackAIP, attackBIP, 64, 4000, 9000, make([]byte, 64-14-28))
	// The same stream without a capture first: the loss the machine has
	// anyway at this rate (0 at the CI's 20 kpps), the baseline.
	var sent atomic.Uint64
	base0 := rxPackets()
	if err := <-startPacedUDP(t, e.host("a"), total, rate, template, &sent, nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	baseLost := int64(total) - int64(rxPackets()-base0)
	rx.close()
	rx = startUDPCounter(t, b.NS, 9000, total+1000)
	defer rx.close()
	rx0 := rxPackets()
	// A client that sends the request and never reads the answer.
	c, err := net.Dial("unix", e.CtlPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.NewEncoder(c).Encode(ctlsock.Request{Lines: []string{"capture pa in"}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if err := <-startPacedUDP(t, e.host("a"), total, rate, template, &sent, nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	delivered := rxPackets() - rx0
	rx.close() // its counts are final
	missing := 0
	for i := range total {
		if !rx.seen[i] {
			missing++
		}
	}
	c.Close()
	ok, why := eventually(5*time.Second, func() (bool, string) {
		return strings.Contains(e.stderr.String(), "capture ended"), "no capture ended in the log"
	})
	if !ok {
		t.Fatal(why)
	}
	var line string
	for _, l := range strings.Split(e.stderr.String(), "\n") {
		if strings.Contains(l, "capture ended") {
			line = l
		}
	}
	lost := int64(total) - int64(delivered)
	t.Logf("%d datagrams at %d/s: without a capture %d lost; with a stalled capture on pa b's interface received %d (%d lost), its socket missed %d; %s",
		total, rate, baseLost, delivered, lost, missing, line)
	if lost > max(baseLost, 0) {
		t.Errorf("%d of %d datagrams lost while the capture's reader stalled, %d without a capture", lost, total, baseLost)
	}
	if rate <= 20000 && missing != 0 { // at higher rates b's own socket may lag: the interface count is the router's
		t.Errorf("%d of %d datagrams missing at b's socket", missing, total)
	}
	if strings.Contains(line, "dropped=0 ") {
		t.Errorf("the stalled reader dropped nothing? %s", line)
	}
}
