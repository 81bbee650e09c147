//go:build race

package l2

// raceEnabled: the race detector slows the randomized tests ~10x; they run
// fewer seeds under it (the full count runs without -race).
const raceEnabled = true
