package config

// Suggestions for misspelt keywords: `unknown keyword "metrc" (did you mean
// "metric"?)`. A word that names no keyword is compared with the keywords
// the context offers (keyword.offered): a keyword it begins (an
// abbreviation of a keyword iproute2 compares exactly, `nhi` for `nhid`)
// or one a typo away (or whose abbreviation is: `dle` for `delete`) (optimal string alignment distance: insertions,
// deletions, substitutions and swaps of neighbours, at most 1 for keywords
// of up to 4 letters, 2 for longer ones). Only error paths run this.
//
// Locking: none.

import "fmt"

// suggest returns the keyword of the tables that word most likely means
// ("" when none is close): the first of the closest, in table order.
func suggest(word string, cfg bool, tables ...*keywords) string {
	if word == "" {
		return ""
	}
	best, bestD := "", 3
	for _, t := range tables {
		for _, k := range t.table {
			if !k.offered(cfg) {
				continue
			}
			d := editDistance(word, k.word)
			if matches(word, k.word) {
				d = 0 // an abbreviation of an exact keyword
			} else if len(word) >= 3 && len(word) < len(k.word) {
				// a misspelt abbreviation (`dle` for `del`ete)
				d = min(d, editDistance(word, k.word[:len(word)]))
			}
			limit := 2
			if len(k.word) <= 4 {
				limit = 1
			}
			if d <= limit && d < bestD {
				best, bestD = k.word, d
			}
		}
	}
	return best
}

// errUnknownKeyword reports a word that is not a keyword where one was
// expected, with the closest keyword of the tables when there is one.
func errUnknownKeyword(word string, cfg bool, tables ...*keywords) error {
	if s := suggest(word, cfg, tables...); s != "" {
		return fmt.Errorf("unknown keyword %s (did you mean %s?)", Quote(word), Quote(s))
	}
	return fmt.Errorf("unknown keyword %s", Quote(word))
}

// editDistance is the optimal string alignment distance of a and b (bytes).
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64 // no keyword is that long
	}
	// d[i][j]: the distance of a[:i] and b[:j]; three rows suffice.
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
