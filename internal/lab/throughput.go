package lab

// Throughput between two hosts of a lab network: an iperf3 TCP run when
// iperf3 is installed (a real TCP stack on each side, offloads and all), or
// else the built-in generator: vethlab's Blaster sending 64-byte UDP frames
// from one host's interface to the other host through the router, counted
// by a Sink on the receiving host's interface.
//
// Locking: none.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/internal/vethlab"
)

// ThroughputResult is one run.
type ThroughputResult struct {
	Tool     string // "iperf3" or "blaster"
	Duration time.Duration
	// iperf3: TCP goodput at the receiver and sender retransmissions.
	Gbps        float64
	Retransmits int
	// blaster: offered and delivered 64-byte frames per second.
	OfferedPPS, DeliveredPPS float64
	Loss                     float64
	Command                  string // what ran (for the report)
}

func (r ThroughputResult) String() string {
	if r.Tool == "iperf3" {
		return fmt.Sprintf("iperf3 TCP %.2f Gbit/s over %v (%d retransmits)", r.Gbps, r.Duration, r.Retransmits)
	}
	return fmt.Sprintf("64-byte UDP: offered %.3f Mpps, delivered %.3f Mpps (loss %.2f%%) over %v",
		r.OfferedPPS/1e6, r.DeliveredPPS/1e6, 100*r.Loss, r.Duration)
}

// HaveIperf3 reports whether iperf3 is installed.
func HaveIperf3() bool {
	_, err := exec.LookPath("iperf3")
	return err == nil
}

// Iperf3 runs a TCP test from client to server (namespaces) for d, to
// server address addr; with reverse the server sends.
func Iperf3(ctx context.Context, clientNS, serverNS string, addr netip.Addr, d time.Duration) (ThroughputResult, error) {
	r := ThroughputResult{Tool: "iperf3", Duration: d}
	port := "5201"
	srv := exec.CommandContext(ctx, "ip", "netns", "exec", serverNS, "iperf3", "-s", "-1", "-B", addr.String(), "-p", port)
	var srvOut strings.Builder
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	if err := srv.Start(); err != nil {
		return r, err
	}
	defer func() {
		if srv.ProcessState == nil {
			srv.Process.Kill()
			srv.Wait()
		}
	}()
	// Wait until the server listens. (Not by connecting: iperf3 -1 would
	// take a probe connection for its one client.)
	deadline := time.Now().Add(5 * time.Second)
	for !tcpListening(serverNS, 5201) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			srv.Process.Kill()
			srv.Wait()
			return r, fmt.Errorf("iperf3 server in %s did not start: %s", serverNS, srvOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	secs := strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
	args := []string{"netns", "exec", clientNS, "iperf3", "-c", addr.String(), "-p", port, "-t", secs, "-J"}
	r.Command = "ip " + strings.Join(args, " ")
	out, err := exec.CommandContext(ctx, "ip", args...).Output()
	var res struct {
		End struct {
			SumSent struct {
				Retransmits int `json:"retransmits"`
			} `json:"sum_sent"`
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
				Seconds       float64 `json:"seconds"`
			} `json:"sum_received"`
		} `json:"end"`
		Error string `json:"error"`
	}
	if jerr := json.Unmarshal(out, &res); jerr != nil {
		return r, errors.Join(fmt.Errorf("iperf3: %s", strings.TrimSpace(string(out))), err, jerr)
	}
	if res.Error != "" {
		return r, fmt.Errorf("iperf3: %s", res.Error)
	}
	if err != nil {
		return r, fmt.Errorf("iperf3: %w", err)
	}
	r.Gbps = res.End.SumReceived.BitsPerSecond / 1e9
	r.Retransmits = res.End.SumSent.Retransmits
	return r, nil
}

// tcpListening reports whether a TCP socket listens on port in namespace
// ns (/proc/thread-self/net/tcp: /proc/net is the main thread's namespace).
func tcpListening(ns string, port int) bool {
	var b []byte
	pktio.InNetns(ns, func() error {
		var err error
		b, err = os.ReadFile("/proc/thread-self/net/tcp")
		return err
	})
	want := fmt.Sprintf(":%04X", port)
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 3 && strings.HasSuffix(f[1], want) && f[3] == "0A" {
			return true
		}
	}
	return false
}

// Blast sends 64-byte UDP frames from host from (through its gateway, MAC
// gwMAC) to host to for d, as fast as one goroutine can, and counts them on
// to's interface.
func Blast(ctx context.Context, from, to *Host, gwMAC net.HardwareAddr, d time.Duration) (ThroughputResult, error) {
	r := ThroughputResult{Tool: "blaster", Duration: d,
		Command: fmt.Sprintf("built-in blaster on %s:%s -> %s, counted on %s:%s", from.NS, from.Iface, to.Addr.Addr(), to.NS, to.Iface)}
	var sink *vethlab.Sink
	if err := pktio.InNetns(to.NS, func() error {
		var err error
		sink, err = vethlab.NewSink(vethlab.SinkConfig{Iface: to.Iface})
		return err
	}); err != nil {
		return r, err
	}
	sinkErr := make(chan error, 1)
	go func() { sinkErr <- sink.Run() }()
	var bl *vethlab.Blaster
	if err := pktio.InNetns(from.NS, func() error {
		var err error
		bl, err = vethlab.NewBlaster(vethlab.BlasterConfig{Iface: from.Iface, DstMAC: gwMAC,
			SrcIP: from.Addr.Addr(), DstIP: to.Addr.Addr(), SrcPort: 10000, Flows: 16})
		return err
	}); err != nil {
		sink.Close()
		<-sinkErr
		return r, err
	}
	defer bl.Close()
	runCtx, cancel := context.WithTimeout(ctx, d)
	start := time.Now()
	sent, berr := bl.Run(runCtx, 0)
	cancel()
	elapsed := time.Since(start)
	time.Sleep(200 * time.Millisecond) // in flight
	delivered := sink.Packets()
	cerr := sink.Close()
	if err := errors.Join(berr, cerr, <-sinkErr); err != nil {
		return r, err
	}
	r.OfferedPPS = float64(sent) / elapsed.Seconds()
	r.DeliveredPPS = float64(delivered) / elapsed.Seconds()
	if sent > 0 && delivered < sent {
		r.Loss = float64(sent-delivered) / float64(sent)
	}
	return r, nil
}
