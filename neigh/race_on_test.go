//go:build race

package l3

// neighRaceEnabled shrinks the randomized tests under the race detector.
const neighRaceEnabled = true
