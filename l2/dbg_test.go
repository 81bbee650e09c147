package l2

import (
	"os"
	"strconv"
	"testing"
)

// TestDbgSeed replays one seed of the differential test with a log of every
// op and frame: DBGSEED=N go test -v -run DbgSeed ./l2 (skipped otherwise).
func TestDbgSeed(t *testing.T) {
	s, err := strconv.Atoi(os.Getenv("DBGSEED"))
	if err != nil {
		t.Skip()
	}
	w := newDiffWorld(t, uint64(s))
	dbgHook = func(step int, what string) { t.Logf("step %d: %s", step, what) }
	defer func() { dbgHook = nil }()
	w.run(400)
}
