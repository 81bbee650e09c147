package daemon

// Multi-queue AF_XDP: veths with two queues on both sides, two workers;
// queue q of each port goes to worker q, so flows spread over both workers
// and every frame still arrives.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/internal/pktio/afxdp"
	"github.com/netfwd/netfwd/internal/testenv"
	"github.com/netfwd/netfwd/internal/vethlab"
)

func TestAFXDPMultiQueue(t *testing.T) {
	testenv.RequireRoot(t)
	h1, r, h2 := testenv.Netns(t, "mqH1"), testenv.Netns(t, "mqR"), testenv.Netns(t, "mqH2")
	for _, c := range [][]string{
		{"-n", r, "link", "add", "r1", "numtxqueues", "2", "numrxqueues", "2", "type", "veth", "peer", "name", "h1",
			"numtxqueues", "2", "numrxqueues", "2", "netns", h1},
		{"-n", r, "link", "add", "r2", "numtxqueues", "2", "numrxqueues", "2", "type", "veth", "peer", "name", "h2",
			"numtxqueues", "2", "numrxqueues", "2", "netns", h2},
		{"-n", r, "link", "set", "r1", "up"}, {"-n", r, "link", "set", "r2", "up"},
		{"-n", h1, "link", "set", "h1", "up"}, {"-n", h2, "link", "set", "h2", "up"},
		{"-n", h1, "addr", "add", "10.1.0.2/24", "dev", "h1"}, {"-n", h1, "route", "add", "default", "via", "10.1.0.1"},
		{"-n", h2, "addr", "add", "10.2.0.2/24", "dev", "h2"}, {"-n", h2, "route", "add", "default", "via", "10.2.0.1"},
	} {
		testenv.Run(t, "ip", c...)
	}
	// The hosts finish their own checksums (docs/pktio.md: veth and AF_XDP).
	for _, h := range [][2]string{{h1, "h1"}, {h2, "h2"}} {
		if err := vethlab.TxChecksumOff(h[0], h[1]); err != nil {
			t.Fatal(err)
		}
	}
	conf := filepath.Join(t.TempDir(), "r.conf")
	os.WriteFile(conf, []byte("address add 10.1.0.1/24 dev r1\naddress add 10.2.0.1/24 dev r2\n"), 0o644)
	d, err := New(Options{ConfigFile: conf, Netns: r, Workers: 2, IO: "afxdp",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	for _, w := range d.workers {
		if len(w.rx) != 2 {
			t.Fatalf("worker %d has %d receive queues, want one on each port", w.idx, len(w.rx))
		}
	}
	// 64 UDP flows from h1 to a socket in h2.
	var ln *net.UDPConn
	if err := pktio.InNetns(h2, func() error {
		var err error
		ln, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 2, 0, 2), Port: 7000})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan int)
	go func() {
		n := 0
		buf := make([]byte, 2048)
		ln.SetReadDeadline(time.Now().Add(5 * time.Second))
		for {
			if _, _, err := ln.ReadFromUDP(buf); err != nil {
				got <- n
				return
			}
			n++
			ln.SetReadDeadline(time.Now().Add(time.Second))
		}
	}()
	const flows, per = 64, 10
	err = pktio.InNetns(h1, func() error {
		for f := range flows {
			c, err := net.DialUDP("udp4", &net.UDPAddr{Port: 20000 + f}, &net.UDPAddr{IP: net.IPv4(10, 2, 0, 2), Port: 7000})
			if err != nil {
				return err
			}
			for i := range per {
				c.Write(fmt.Appendf(nil, "flow %d packet %d", f, i))
				if i == 0 {
					time.Sleep(20 * time.Millisecond) // the first one waits for ARP
				}
			}
			c.Close()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := <-got; n < flows*per*95/100 {
		t.Errorf("received %d of %d datagrams", n, flows*per)
	}
	for _, w := range d.workers {
		var rx uint64
		for _, b := range w.rx {
			if xs, ok := b.tx.(*afxdp.Socket); ok && b.p.name == "r1" {
				rx = xs.Stats().Rx.Packets
			}
		}
		t.Logf("worker %d: %d frames from r1", w.idx, rx)
		if rx == 0 {
			t.Errorf("worker %d received nothing on its queue of r1: flows did not spread", w.idx)
		}
	}
}
