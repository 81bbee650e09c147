package config

import "testing"

// find through the first-byte index answers as iproute2's linear walk of
// the table does, for every keyword, every abbreviation of it and words
// that name none.
func TestKeywordIndex(t *testing.T) {
	linear := func(kt *keywords, word string) (keyword, bool) {
		for _, k := range kt.table {
			if word == k.word || !k.exact && matches(word, k.word) {
				return k, true
			}
		}
		return keyword{}, false
	}
	if len(allTables) < 30 {
		t.Fatalf("only %d keyword tables registered", len(allTables))
	}
	words := []string{"", "x", "0", "10.0.0.0/8", "-", "--", "203.0.113.1", "eth0", "défaut"}
	for _, kt := range allTables {
		for _, k := range kt.table {
			for i := 1; i <= len(k.word); i++ {
				words = append(words, k.word[:i], k.word[:i]+"x")
			}
		}
	}
	checked := 0
	for _, kt := range allTables {
		for _, w := range words {
			got, gotOK := kt.find(w)
			want, wantOK := linear(kt, w)
			if got != want || gotOK != wantOK {
				t.Fatalf("%s: find(%q) = %v %v, the table walk gives %v %v", kt.what, w, got, gotOK, want, wantOK)
			}
			checked++
		}
	}
	t.Logf("%d lookups checked", checked)
}
