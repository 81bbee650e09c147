//go:build !race

package neigh

const raceEnabled = false
