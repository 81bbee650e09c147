package fpm

// What a connection costs once it is gone (issue 19, item 8: 1,000
// connections left the daemon's RSS 67-74 MiB higher for minutes: each
// allocated a 256 KiB read buffer, garbage the heap then kept room for).

import (
	"net"
	"runtime"
	"testing"
	"time"
)

// TestMemoryFPMConnections: 1,000 connections one after the other, each
// sending a route and closing. Afterwards the goroutines are back to the
// baseline and the heap in use after a collection grew by at most 2 MiB
// (2 KiB a connection: nothing of a connection may stay; measured +0.1
// MiB). A connection's own state (session, translator, timers, the conn)
// is ~5 KiB of allocations: the bound of 32 KiB allocated per connection
// is an eighth of the read buffer each used to allocate (measured 267 KB
// before, 5 KB now, with and without -race), and the heap held from the
// OS, which the resident size follows, may grow by at most 8 MiB (what
// 1,000 connections allocate, ~5 MiB, plus slack; it grew by 62 MiB
// before). Runs under -race as well (CI): the race detector's shadow
// memory is outside the Go heap, and the spare read buffer is no
// sync.Pool, which drops buffers at random under -race.
func TestMemoryFPMConnections(t *testing.T) {
	const conns = 1000
	s := newServer(t, nil, func(o *Options) { o.IdleCommit = time.Millisecond })
	cycle := func(n uint64) {
		c, err := net.Dial("tcp", s.Addr().String()) // not s.dial: its cleanups stay until the test ends
		if err != nil {
			t.Fatal(err)
		}
		s.send(t, c, oneRoute("10.1.0.0/16"))
		c.Close()
		s.waitEnded(t, n)
	}
	for i := range uint64(10) { // warm up: pools, the FIB's first versions
		cycle(i + 1)
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	goroutines := runtime.NumGoroutine()
	for i := range uint64(conns) {
		cycle(i + 11)
	}
	var g int
	for range 100 { // the sessions' goroutines end right after endSession
		if g = runtime.NumGoroutine(); g <= goroutines {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perConn := (after.TotalAlloc - before.TotalAlloc) / conns
	grown := int64(after.HeapInuse) - int64(before.HeapInuse)
	t.Logf("%d connections: %d bytes allocated a connection, heap in use %+d KiB (%d -> %d KiB), heap from the OS %+d KiB, goroutines %d -> %d",
		conns, perConn, grown>>10, before.HeapInuse>>10, after.HeapInuse>>10,
		(int64(after.HeapSys-after.HeapReleased)-int64(before.HeapSys-before.HeapReleased))>>10, goroutines, g)
	if g > goroutines {
		t.Errorf("goroutines: %d, %d before the connections", g, goroutines)
	}
	if perConn > 32<<10 {
		t.Errorf("%d bytes allocated a connection, want at most 32 KiB", perConn)
	}
	if held := int64(after.HeapSys-after.HeapReleased) - int64(before.HeapSys-before.HeapReleased); held > 8<<20 {
		t.Errorf("heap held from the OS grew by %d KiB after %d connections, want at most 8 MiB", held>>10, conns)
	}
	if grown > 2<<20 {
		t.Errorf("heap in use grew by %d KiB after %d connections, want at most 2 MiB", grown>>10, conns)
	}
}
