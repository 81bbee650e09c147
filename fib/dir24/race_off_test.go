//go:build !race

// See compiled_race_test.go.

package dir24

const raceEnabled = false
