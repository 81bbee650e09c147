//go:build race

package fib

// raceEnabled shrinks the randomized tests under the race detector (10x
// slower): the concurrency test keeps its full size, the model tests run
// fewer seeds.
const raceEnabled = true
