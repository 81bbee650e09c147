//go:build race

package neigh

// raceEnabled shrinks the randomized tests under the race detector.
const raceEnabled = true
