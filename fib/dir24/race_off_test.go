//go:build !race

// See compiled_race_test.go.

package fib

const cplRaceEnabled = false
