//go:build !race

package l2

const raceEnabled = false
