package hostpath

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/netfwd/netfwd/wire"
)

// refRing is the punt queue written the slow, obvious way: explicit
// granule cells marked free or taken, a record placed at the write position
// or, when it does not fit before the end, at the start (the cells up to
// the end taken as padding), accepted only if every cell it needs is free.
type refRing struct {
	cells []bool // taken
	pos   int    // write position (cell index)
	recs  []refRec
	max   int
}

type refRec struct {
	cells []int // cells to free when it is consumed (padding included)
	data  []byte
}

func newRefRing(granules, max int) *refRing {
	return &refRing{cells: make([]bool, granules), max: max}
}

func (r *refRing) push(data []byte) (ok, tooBig bool) {
	if len(data) == 0 || len(data) > r.max {
		return false, true
	}
	g := (len(data) + granule - 1) / granule
	var need []int
	at := r.pos
	if at+g > len(r.cells) {
		for i := at; i < len(r.cells); i++ {
			need = append(need, i)
		}
		at = 0
	}
	for i := at; i < at+g; i++ {
		need = append(need, i)
	}
	for _, i := range need {
		if r.cells[i] {
			return false, false
		}
	}
	for _, i := range need {
		r.cells[i] = true
	}
	r.pos = (at + g) % len(r.cells)
	r.recs = append(r.recs, refRec{cells: need, data: bytes.Clone(data)})
	return true, false
}

func (r *refRing) pop() ([]byte, bool) {
	if len(r.recs) == 0 {
		return nil, false
	}
	rec := r.recs[0]
	r.recs = r.recs[1:]
	for _, i := range rec.cells {
		r.cells[i] = false
	}
	return rec.data, true
}

// TestPuntQueueMatchesReference: random pushes (split into the three parts
// push takes) and pops on the queue and the reference ring: the same
// accept/refuse decisions, the same records out in the same order.
func TestPuntQueueMatchesReference(t *testing.T) {
	pool := make([]byte, 1<<16)
	for i := range pool {
		pool[i] = byte(i*7 + i>>8)
	}
	for seed := range uint64(150) {
		r := rand.New(rand.NewPCG(seed, 11))
		q := newPuntQueue(1024 << r.IntN(4)) // 16..128 granules
		ref := newRefRing(int(q.size), q.max)
		for step := range 2000 {
			if r.IntN(100) < 55 {
				n := 1 + r.IntN(q.max+q.max/8)
				if r.IntN(3) == 0 {
					n = 1 + r.IntN(80)
				}
				at := r.IntN(len(pool) - n)
				data := pool[at : at+n]
				a, b := r.IntN(n+1), 0
				b = a + r.IntN(n-a+1)
				ok, big := q.push(data[:a], data[a:b], data[b:])
				rok, rbig := ref.push(data)
				if ok != rok || big != rbig {
					t.Fatalf("seed %d step %d: push of %d bytes: (ok %v, too big %v), reference (%v, %v); pending %d of %d granules",
						seed, step, n, ok, big, rok, rbig, q.pending(), q.size)
				}
				continue
			}
			got, ok := q.peek()
			want, rok := ref.pop()
			if ok != rok {
				t.Fatalf("seed %d step %d: peek found %v, reference %v", seed, step, ok, rok)
			}
			if ok {
				if !bytes.Equal(got, want) {
					t.Fatalf("seed %d step %d: record of %d bytes differs from the reference's %d", seed, step, len(got), len(want))
				}
				q.release()
			}
		}
	}
}

// TestPuntQueueConcurrent: producers push numbered records while one
// consumer drains with wait (as the writer goroutine does). Each producer's
// records must come out in order and intact, and delivered + refused must
// be everything pushed.
func TestPuntQueueConcurrent(t *testing.T) {
	const producers, perProducer = 4, 5000
	q := newPuntQueue(64 << 10)
	stop := make(chan struct{})
	refused := make([]int, producers)
	got := make([]int, producers)
	last := make([]int, producers)
	for i := range last {
		last[i] = -1
	}
	var bad []string
	var cons sync.WaitGroup
	cons.Go(func() {
		for {
			rec, ok := q.peek()
			if !ok {
				if !q.wait(stop) {
					// Drain what is left after the producers stopped.
					if _, ok := q.peek(); !ok {
						return
					}
				}
				continue
			}
			p, seq := int(rec[0]), int(binary.BigEndian.Uint32(rec[1:]))
			if seq <= last[p] {
				bad = append(bad, "out of order")
			}
			for i, c := range rec[5:] {
				if c != byte(seq+i) {
					bad = append(bad, "corrupt record")
					break
				}
			}
			last[p] = seq
			got[p]++
			q.release()
		}
	})
	var prod sync.WaitGroup
	for p := range producers {
		prod.Go(func() {
			r := rand.New(rand.NewPCG(uint64(p), 3))
			buf := make([]byte, 5+3000)
			for seq := range perProducer {
				n := 5 + r.IntN(3000)
				buf[0] = byte(p)
				binary.BigEndian.PutUint32(buf[1:], uint32(seq))
				for i := range buf[5:n] {
					buf[5+i] = byte(seq + i)
				}
				if ok, _ := q.push(buf[:1], buf[1:5], buf[5:n]); !ok {
					refused[p]++
				}
			}
		})
	}
	prod.Wait()
	close(stop)
	cons.Wait()
	if len(bad) > 0 {
		t.Fatalf("%d bad records, first: %s", len(bad), bad[0])
	}
	total := 0
	for p := range producers {
		if got[p]+refused[p] != perProducer {
			t.Errorf("producer %d: %d delivered + %d refused != %d pushed", p, got[p], refused[p], perProducer)
		}
		total += got[p]
	}
	if total == 0 {
		t.Fatal("nothing was delivered")
	}
	t.Logf("delivered %d of %d", total, producers*perProducer)
}

func TestPuntQueueAllocs(t *testing.T) {
	q := newPuntQueue(64 << 10)
	frame := make([]byte, 100)
	var hdr [wire.VirtioNetHdrLen]byte
	a := testing.AllocsPerRun(1000, func() {
		q.push(hdr[:], frame[:12], frame[12:])
		if _, ok := q.peek(); ok {
			q.release()
		}
	})
	if a != 0 {
		t.Fatalf("push/peek/release allocate %v per frame", a)
	}
}
