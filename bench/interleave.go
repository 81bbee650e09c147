package bench

// Measuring on a shared machine: the flood and fdb suites build all their
// cases first and measure them in interleaved rounds (interleaved), keeping
// each case's fastest run; flood builds each case several times and keeps
// the median of those (medianResult).

import (
	"runtime"
	"sort"
)

// medianResult returns the result with the median ns/op.
func medianResult(rs []Result) Result {
	s := append([]Result(nil), rs...)
	sort.Slice(s, func(i, j int) bool { return s[i].NsOp < s[j].NsOp })
	return s[len(s)/2]
}

func round2(x float64) float64 { return float64(int64(x*100+0.5)) / 100 }

// interleaved measures every body once per round, for several rounds, and
// keeps each body's fastest run. Interference on a shared machine only adds
// time, so the minimum is the best estimate of the cost; interleaving
// spreads bursts of interference over all cases instead of penalising the
// ones that happen to run during a burst. Many short rounds (9 of 1/12 of
// the suite duration; 2 with --quick) catch more quiet moments than a few
// long ones.
func interleaved(opts Options, bodies []func(n int)) []Result {
	return interleavedRounds(opts, bodies, 9)
}

// interleavedRounds is interleaved with a chosen number of rounds (quick
// runs keep 2): suites whose figure is a difference of two cases take more,
// since the difference is only as steady as both minimums.
func interleavedRounds(opts Options, bodies []func(n int), rounds int) []Result {
	slice := opts.Duration() / 12
	if opts.Quick {
		rounds, slice = 2, opts.Duration()/5
	}
	best := make([]Result, len(bodies))
	runtime.GC() // finish collecting the setup garbage before timing anything
	for r := 0; r < rounds; r++ {
		for i, body := range bodies {
			m := Measure(slice, body)
			if r == 0 || m.NsOp < best[i].NsOp {
				best[i] = m
			}
		}
		opts.Log("round %d of %d done", r+1, rounds)
	}
	return best
}
