// Package race tells tests whether the race detector is on: it slows the
// randomized tests about tenfold and multiplies the cost of wide memory
// sweeps, so they run smaller workloads under it (the full sizes run
// without -race).
package race
