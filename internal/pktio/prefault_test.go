package pktio

import (
	"bytes"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Prefault changes no byte of a mapping, even while another writer
// updates the very words it touches: every increment the writer made is
// still there.
func TestPrefaultChangesNothing(t *testing.T) {
	const pages = 64
	mem, err := unix.Mmap(-1, 0, pages*4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range mem {
		mem[i] = byte(rng.Uint32())
	}
	want := bytes.Clone(mem)
	Prefault(mem)
	if !bytes.Equal(mem, want) {
		t.Fatal("Prefault changed the mapping")
	}
	// A concurrent writer: increments of each page's first word.
	const rounds = pages * 300
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for r := range rounds {
			atomic.AddUint32((*uint32)(unsafe.Pointer(&mem[(r%pages)*4096])), 1)
		}
	}()
	for range 200 {
		Prefault(mem)
	}
	wg.Wait()
	for p := range pages {
		got := *(*uint32)(unsafe.Pointer(&mem[p*4096]))
		base := *(*uint32)(unsafe.Pointer(&want[p*4096]))
		if got-base != rounds/pages {
			t.Fatalf("page %d: %d increments survived, want %d", p, got-base, rounds/pages)
		}
	}
}
