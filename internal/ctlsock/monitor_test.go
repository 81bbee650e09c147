package ctlsock

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/apply"
	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/l3"
)

// A monitor client that stops reading blocks neither the applier nor the
// poller: its bounded queue drops events, and once it reads again its
// stream says how many were lost before it goes on.
func TestMonitorSlowClientLosesEvents(t *testing.T) {
	c := apply.New(l3.NewEngine(l3.EngineOptions{}))
	m := NewMonitor(c)
	m.Interval, m.QueueLen = 2*time.Millisecond, 4
	pr, pw := io.Pipe()
	rw := newResponseWriter(pw, 16) // every event reaches the pipe, which nobody reads yet
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() { m.stream(rw, config.Monitor{Objects: config.MonitorRoute}, false, done); close(ended) }()
	for {
		m.mu.Lock()
		n := len(m.subs)
		m.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond) // the poller's first snapshot
	add := func(i int) {
		start := time.Now()
		if err := c.Apply(parseLines(t, fmt.Sprintf("route add blackhole 10.%d.0.0/16", i))); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("an apply took %v with a stuck monitor client", d)
		}
		time.Sleep(6 * time.Millisecond) // a poll each
	}
	for i := range 40 {
		add(i)
	}
	var mu sync.Mutex
	var got strings.Builder
	go copyOutput(bufio.NewReader(pr), bufio.NewWriter(lockedWriter{&mu, &got})) // as netfwd ctl reads it
	deadline := time.Now().Add(5 * time.Second)
	for { // the queue drains: its 4 events, after the loss report
		mu.Lock()
		out := got.String()
		mu.Unlock()
		if strings.Contains(out, "blackhole 10.4.0.0/16\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the queue never drained:\n%s", out)
		}
		time.Sleep(5 * time.Millisecond)
	}
	add(99) // and the stream goes on
	for {
		mu.Lock()
		out := got.String()
		mu.Unlock()
		if strings.Contains(out, "blackhole 10.99.0.0/16\n") {
			if !strings.Contains(out, " events lost\n") || !strings.HasPrefix(out, "blackhole 10.0.0.0/16\n") {
				t.Fatalf("no loss report, or not in order:\n%s", out)
			}
			t.Logf("\n%s", out)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stream never caught up:\n%s", out)
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(done)
	<-ended
	pr.Close()
	// The poller stops with its last subscriber.
	time.Sleep(20 * time.Millisecond)
	m.mu.Lock()
	running := m.running
	m.mu.Unlock()
	if running {
		t.Error("poller still running without subscribers")
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
