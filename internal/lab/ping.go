package lab

// Ping from inside a host namespace: iputils ping when it is installed (the
// real tool, its real output), otherwise an equivalent written with
// golang.org/x/net/icmp on a raw ICMP socket opened in the namespace. Both
// produce the same PingResult: replies counted, and every ICMP error that
// came back (time exceeded, unreachable) with the address that sent it, so
// callers can check "the router said TTL exceeded" whatever did the pinging.
//
// Locking: none; each call is independent.

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"

	"github.com/netfwd/netfwd/internal/pktio"
)

// ICMP error kinds as PingError.Kind (the names of the router's
// netfwd ICMP counters).
const (
	KindTTLExceeded     = "ttl_exceeded"
	KindNetUnreachable  = "net_unreachable"
	KindHostUnreachable = "host_unreachable"
	KindProtUnreachable = "protocol_unreachable"
	KindPortUnreachable = "port_unreachable"
	KindFragNeeded      = "frag_needed"
	KindProhibited      = "admin_prohibited"
	KindOther           = "other"
)

// PingOptions say how to ping.
type PingOptions struct {
	Count    int           // echo requests (default 3)
	TTL      int           // IP TTL (default: the system's, 64)
	Interval time.Duration // between requests (default 200ms)
	Wait     time.Duration // for the last reply (default 1s)
	Size     int           // ICMP payload bytes (0: ping's default, 56); iputils ping only
	// Tool is "go" for the Go pinger; "ping" or empty pick iputils ping
	// when it is installed and the Go pinger otherwise.
	Tool string
}

// PingError is one ICMP error a ping received.
type PingError struct {
	From netip.Addr
	Seq  int
	Kind string
}

// PingResult is what a ping saw.
type PingResult struct {
	Tool           string // "ping" (iputils) or "go"
	Sent, Received int
	Duplicates     int // replies received twice (iputils: "+N duplicates")
	Errors         []PingError
	Output         string // ping's output (the Go pinger writes the same format)
	ReplyFrom      netip.Addr
	ReplyTTL       int // TTL of the last reply
	RTT            time.Duration
	MinRTT, MaxRTT time.Duration
	Dst            netip.Addr
	Namespace      string
	RequestedTTL   int
	RequestedCount int
}

// ErrorsFrom returns the errors of one kind sent by from.
func (r PingResult) ErrorsFrom(from netip.Addr, kind string) int {
	n := 0
	for _, e := range r.Errors {
		if e.From == from && e.Kind == kind {
			n++
		}
	}
	return n
}

// HavePing reports whether iputils ping is installed.
func HavePing() bool {
	_, err := exec.LookPath("ping")
	return err == nil
}

// Ping pings dst from namespace ns.
func Ping(ns string, dst netip.Addr, o PingOptions) (PingResult, error) {
	if o.Count == 0 {
		o.Count = 3
	}
	if o.Interval == 0 {
		o.Interval = 200 * time.Millisecond
	}
	if o.Wait == 0 {
		o.Wait = time.Second
	}
	tool := o.Tool
	if tool == "" || tool == "ping" {
		tool = "go"
		if HavePing() {
			tool = "ping"
		}
	}
	var r PingResult
	var err error
	if tool == "ping" {
		r, err = systemPing(ns, dst, o)
	} else {
		r, err = goPing(ns, dst, o)
	}
	r.Dst, r.Namespace, r.RequestedTTL, r.RequestedCount = dst, ns, o.TTL, o.Count
	return r, err
}

var (
	rePingReply   = regexp.MustCompile(`^\d+ bytes from ([0-9.]+): icmp_seq=(\d+) ttl=(\d+) time=([0-9.]+) ms`)
	rePingError   = regexp.MustCompile(`^From ([0-9.]+)(?: [^ ]+)? icmp_seq=(\d+) (.*)$`)
	rePingSummary = regexp.MustCompile(`^(\d+) packets transmitted, (\d+) received(?:, \+(\d+) duplicates)?`)
)

// pingErrorKinds maps iputils' texts (ping4_common.c, pr_icmph) to kinds.
var pingErrorKinds = []struct{ prefix, kind string }{
	{"Time to live exceeded", KindTTLExceeded},
	{"Destination Net Unreachable", KindNetUnreachable},
	{"Destination Host Unreachable", KindHostUnreachable},
	{"Destination Protocol Unreachable", KindProtUnreachable},
	{"Destination Port Unreachable", KindPortUnreachable},
	{"Frag needed", KindFragNeeded},
	{"Packet filtered", KindProhibited},
	{"Destination Net Prohibited", KindProhibited},
	{"Destination Host Prohibited", KindProhibited},
}

func systemPing(ns string, dst netip.Addr, o PingOptions) (PingResult, error) {
	args := []string{"netns", "exec", ns, "ping", "-n", "-c", strconv.Itoa(o.Count),
		"-i", fmt.Sprintf("%.3f", o.Interval.Seconds()), "-W", fmt.Sprintf("%.3f", o.Wait.Seconds())}
	if o.TTL > 0 {
		args = append(args, "-t", strconv.Itoa(o.TTL))
	}
	if o.Size > 0 {
		args = append(args, "-s", strconv.Itoa(o.Size))
	}
	args = append(args, dst.String())
	out, err := exec.Command("ip", args...).CombinedOutput()
	r := PingResult{Tool: "ping", Output: string(out)}
	parsePingOutput(&r)
	// ping exits 1 when replies were missing and 2 on other errors.
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1) {
		return r, fmt.Errorf("ping %s in %s: %w: %s", dst, ns, err, strings.TrimSpace(string(out)))
	}
	if r.Sent == 0 {
		return r, fmt.Errorf("ping %s in %s: no summary in output: %s", dst, ns, strings.TrimSpace(string(out)))
	}
	return r, nil
}

// parsePingOutput fills r from iputils ping output.
func parsePingOutput(r *PingResult) {
	sc := bufio.NewScanner(strings.NewReader(r.Output))
	var sum time.Duration
	replies := 0
	for sc.Scan() {
		line := sc.Text()
		if m := rePingReply.FindStringSubmatch(line); m != nil {
			r.ReplyFrom, _ = netip.ParseAddr(m[1])
			r.ReplyTTL, _ = strconv.Atoi(m[3])
			ms, _ := strconv.ParseFloat(m[4], 64)
			r.addRTT(time.Duration(ms*float64(time.Millisecond)), &sum)
			replies++
			continue
		}
		if m := rePingError.FindStringSubmatch(line); m != nil {
			from, _ := netip.ParseAddr(m[1])
			seq, _ := strconv.Atoi(m[2])
			kind := KindOther
			for _, k := range pingErrorKinds {
				if strings.HasPrefix(m[3], k.prefix) {
					kind = k.kind
					break
				}
			}
			r.Errors = append(r.Errors, PingError{From: from, Seq: seq, Kind: kind})
			continue
		}
		if m := rePingSummary.FindStringSubmatch(line); m != nil {
			r.Sent, _ = strconv.Atoi(m[1])
			r.Received, _ = strconv.Atoi(m[2])
			r.Duplicates, _ = strconv.Atoi(m[3])
		}
	}
	if replies > 0 {
		r.RTT = sum / time.Duration(replies)
	}
}

func (r *PingResult) addRTT(d time.Duration, sum *time.Duration) {
	*sum += d
	if r.MinRTT == 0 || d < r.MinRTT {
		r.MinRTT = d
	}
	if d > r.MaxRTT {
		r.MaxRTT = d
	}
}

// goPing is ping written with x/net/icmp: echo requests on a raw ICMP
// socket created in ns, with the requested TTL; it reads every ICMP message
// arriving in the namespace and keeps the echo replies and the errors that
// quote one of its own requests (same identifier).
func goPing(ns string, dst netip.Addr, o PingOptions) (PingResult, error) {
	r := PingResult{Tool: "go"}
	var c *icmp.PacketConn
	if err := pktio.InNetns(ns, func() error {
		var err error
		c, err = icmp.ListenPacket("ip4:icmp", "0.0.0.0")
		return err
	}); err != nil {
		return r, fmt.Errorf("go ping in %s: %w", ns, err)
	}
	defer c.Close()
	p4 := c.IPv4PacketConn()
	if o.TTL > 0 {
		if err := p4.SetTTL(o.TTL); err != nil {
			return r, err
		}
	}
	if err := p4.SetControlMessage(ipv4.FlagTTL, true); err != nil {
		return r, err
	}
	var idb [2]byte
	rand.Read(idb[:])
	id := int(binary.BigEndian.Uint16(idb[:]))
	var out strings.Builder
	fmt.Fprintf(&out, "PING %s (%s) 56(84) bytes of data.\n", dst, dst)
	sentAt := map[int]time.Time{}
	replied := map[int]bool{}
	var sum time.Duration
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type msg struct {
		from netip.Addr
		ttl  int
		b    []byte
		at   time.Time
	}
	msgs := make(chan msg, 64)
	go func() {
		buf := make([]byte, 1500)
		for ctx.Err() == nil {
			p4.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			n, cm, src, err := p4.ReadFrom(buf)
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					continue
				}
				return
			}
			m := msg{b: append([]byte(nil), buf[:n]...), at: time.Now()}
			if ia, ok := src.(*net.IPAddr); ok {
				m.from, _ = netip.AddrFromSlice(ia.IP.To4())
			}
			if cm != nil {
				m.ttl = cm.TTL
			}
			select {
			case msgs <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	handle := func(m msg) {
		pm, err := icmp.ParseMessage(1, m.b)
		if err != nil {
			return
		}
		switch body := pm.Body.(type) {
		case *icmp.Echo:
			if pm.Type != ipv4.ICMPTypeEchoReply || body.ID != id || m.from != dst {
				return
			}
			t0, ok := sentAt[body.Seq]
			if !ok || replied[body.Seq] {
				return
			}
			replied[body.Seq] = true
			rtt := m.at.Sub(t0)
			r.Received++
			r.ReplyFrom, r.ReplyTTL = m.from, m.ttl
			r.addRTT(rtt, &sum)
			fmt.Fprintf(&out, "%d bytes from %s: icmp_seq=%d ttl=%d time=%.3f ms\n", len(m.b), m.from, body.Seq, m.ttl, float64(rtt)/1e6)
		case *icmp.TimeExceeded:
			if seq, ok := quotedEcho(body.Data, id); ok && pm.Type == ipv4.ICMPTypeTimeExceeded {
				r.Errors = append(r.Errors, PingError{From: m.from, Seq: seq, Kind: KindTTLExceeded})
				fmt.Fprintf(&out, "From %s icmp_seq=%d Time to live exceeded\n", m.from, seq)
			}
		case *icmp.DstUnreach:
			if seq, ok := quotedEcho(body.Data, id); ok {
				kind, text := unreachKind(pm.Code)
				r.Errors = append(r.Errors, PingError{From: m.from, Seq: seq, Kind: kind})
				fmt.Fprintf(&out, "From %s icmp_seq=%d %s\n", m.from, seq, text)
			}
		}
	}
	dstAddr := &net.IPAddr{IP: net.IP(dst.AsSlice())}
	payload := make([]byte, 56)
	for seq := 1; seq <= o.Count; seq++ {
		em := icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: id, Seq: seq, Data: payload}}
		b, err := em.Marshal(nil)
		if err != nil {
			return r, err
		}
		sentAt[seq] = time.Now()
		if _, err := c.WriteTo(b, dstAddr); err != nil {
			// Like ping: a local error (no route, ARP failure) is reported.
			fmt.Fprintf(&out, "ping: sendmsg: %v\n", err)
		}
		r.Sent++
		next := time.Now().Add(o.Interval)
		if seq == o.Count {
			next = time.Now().Add(o.Wait)
		}
		for wait := time.Until(next); wait > 0; wait = time.Until(next) {
			select {
			case m := <-msgs:
				handle(m)
			case <-time.After(wait):
			}
			if seq == o.Count && len(replied)+len(r.Errors) >= o.Count {
				break
			}
		}
	}
	if r.Received > 0 {
		r.RTT = sum / time.Duration(r.Received)
	}
	loss := 0
	if r.Sent > 0 {
		loss = 100 * (r.Sent - r.Received) / r.Sent
	}
	fmt.Fprintf(&out, "\n--- %s ping statistics ---\n%d packets transmitted, %d received", dst, r.Sent, r.Received)
	if len(r.Errors) > 0 {
		fmt.Fprintf(&out, ", +%d errors", len(r.Errors))
	}
	fmt.Fprintf(&out, ", %d%% packet loss\n", loss)
	r.Output = out.String()
	return r, nil
}

// quotedEcho finds our echo request in the quoted datagram of an ICMP
// error: the original IPv4 header and at least 8 bytes of its ICMP header.
func quotedEcho(data []byte, id int) (int, bool) {
	if len(data) < 20 {
		return 0, false
	}
	ihl := int(data[0]&0x0f) * 4
	if data[0]>>4 != 4 || ihl < 20 || len(data) < ihl+8 || data[9] != 1 {
		return 0, false
	}
	q := data[ihl:]
	if q[0] != 8 || int(binary.BigEndian.Uint16(q[4:])) != id {
		return 0, false
	}
	return int(binary.BigEndian.Uint16(q[6:])), true
}

// unreachKind names a destination unreachable code, with iputils' text.
func unreachKind(code int) (string, string) {
	switch code {
	case 0:
		return KindNetUnreachable, "Destination Net Unreachable"
	case 1:
		return KindHostUnreachable, "Destination Host Unreachable"
	case 2:
		return KindProtUnreachable, "Destination Protocol Unreachable"
	case 3:
		return KindPortUnreachable, "Destination Port Unreachable"
	case 4:
		return KindFragNeeded, "Frag needed and DF set"
	case 9:
		return KindProhibited, "Destination Net Prohibited"
	case 10:
		return KindProhibited, "Destination Host Prohibited"
	case 13:
		return KindProhibited, "Packet filtered"
	}
	return KindOther, fmt.Sprintf("Dest Unreachable, Bad Code: %d", code)
}
