package apply

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
)

// The randomized test of the applier's all-or-nothing promise: random
// batches go to one live controller. A batch that validation refuses must
// be refused with positioned errors only and change nothing; a batch that
// validation accepts must commit without error (no failure after the
// check, no "rest of the batch is applied"), and the live state after all
// accepted batches must be the state a fresh engine reaches from their
// concatenation as one file (when that file is accepted).
func TestBatchesCommitAsValidated(t *testing.T) {
	seeds := 150
	if testing.Short() {
		seeds = 30
	}
	if v, err := strconv.Atoi(os.Getenv("NETFWD_COMMIT_SEEDS")); err == nil {
		seeds = v
	}
	accepted, refused, compared := 0, 0, 0
	for seed := range seeds {
		r := rand.New(rand.NewPCG(uint64(seed), 5))
		live := newTestController()
		var file []string // the accepted batches, in order
		for batch := range 12 {
			lines := make([]string, 1+r.IntN(8))
			for i := range lines {
				lines[i] = genLine(r)
			}
			// A refused batch is sent again without the lines refused, twice
			// at most, so that both sides are tested often.
			for try := range 3 {
				name := fmt.Sprintf("b%d-%d.conf", batch, try)
				before := live.Snapshot(nil)
				// CheckSteps says what Apply will say, and changes nothing.
				checkErr := live.CheckSteps(Steps(parseLines(t, name, lines)))
				if live.Snapshot(nil) != before {
					t.Fatalf("seed %d: CheckSteps of batch %d changed the state", seed, batch)
				}
				err := live.Apply(parseLines(t, name, lines))
				if fmt.Sprint(checkErr) != fmt.Sprint(err) {
					t.Fatalf("seed %d: batch %d: CheckSteps says %v, Apply %v", seed, batch, checkErr, err)
				}
				if err == nil {
					accepted++
					file = append(file, lines...)
					break
				}
				refused++
				bad := map[int]bool{}
				for _, l := range strings.Split(err.Error(), "\n") {
					if !strings.HasPrefix(l, name+":") || strings.Contains(l, "rest of the batch") ||
						strings.Contains(l, "changed since it was checked") {
						t.Fatalf("seed %d: batch %d failed outside validation: %q\n%s", seed, batch, l, strings.Join(lines, "\n"))
					}
					n, _ := strconv.Atoi(strings.SplitN(strings.TrimPrefix(l, name+":"), ":", 2)[0])
					bad[n] = true
				}
				if live.Snapshot(nil) != before {
					t.Fatalf("seed %d: refused batch %d changed the state:\n%s\nerrors:\n%v", seed, batch, strings.Join(lines, "\n"), err)
				}
				var keep []string
				for i, l := range lines {
					if !bad[i+1] {
						keep = append(keep, l)
					}
				}
				if lines = keep; len(lines) == 0 {
					break
				}
			}
		}
		// As one file the lines may be refused where the batches were not:
		// a file declares every port it names before anything else, and
		// checks neighbour lines against the interfaces it leaves at its
		// end. When the file is accepted, its state must be the batches',
		// but for the neighbours: an interface that goes away and comes
		// back within one file (a port enslaved and released) keeps the
		// entries the file gives it, where separate batches flush them.
		fresh := newTestController()
		if err := fresh.Apply(parseLines(t, "all.conf", file)); err != nil {
			continue
		}
		compared++
		if got, want := noNeigh(live.Snapshot(nil)), noNeigh(fresh.Snapshot(nil)); got != want {
			t.Fatalf("seed %d: live state after the batches differs from the file:\n%s\n%s", seed, strings.Join(file, "\n"), lineDiff(got, want))
		}
	}
	if accepted < seeds*5 || refused < seeds*2 || compared < seeds/2 {
		t.Fatalf("%d batches accepted, %d refused, %d seeds compared with one file: the generator does not test enough",
			accepted, refused, compared)
	}
	t.Logf("%d batches accepted, %d refused, %d of %d seeds compared with one file", accepted, refused, compared, seeds)
}

// noNeigh drops the neighbour lines of a snapshot.
func noNeigh(snap string) string {
	var out []string
	for _, l := range strings.Split(snap, "\n") {
		if !strings.HasPrefix(l, "neigh ") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
