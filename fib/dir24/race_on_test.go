//go:build race

// Under the race detector every array access is instrumented, and the
// compiled FIB's wide rewrites and exhaustive checks touch 2^24 entries:
// tests scale their workloads down with this (the full sizes run without
// -race).

package dir24

const raceEnabled = true
