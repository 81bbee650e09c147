//go:build !race

package l3

const neighRaceEnabled = false
