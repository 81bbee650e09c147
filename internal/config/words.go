package config

// words walks the arguments of one line: a keyword with Next, the value a
// keyword needs with Value. Every parser of iproute2-style "keyword value"
// arguments uses it, so a missing value reads the same everywhere.
//
// Locking: none (one parser's local state).

import (
	"fmt"
	"strings"
)

// words is a cursor over a line's arguments.
type words struct {
	a []string
	i int
	// cfg: the line is read from a config file, where messages offer no
	// query words (keywords.go).
	cfg bool
}

// appendFields appends the words of s (strings.Fields) to dst.
func appendFields(dst []string, s string) []string {
	for f := range strings.FieldsSeq(s) {
		dst = append(dst, f)
	}
	return dst
}

// newWords starts a cursor at args[0].
func newWords(args []string) *words { return &words{a: args} }

// More reports whether words remain.
func (w *words) More() bool { return w.i < len(w.a) }

// Next returns the next word; call it only when More.
func (w *words) Next() string { w.i++; return w.a[w.i-1] }

// Peek returns the next word without taking it ("" at the end).
func (w *words) Peek() string {
	if w.i >= len(w.a) {
		return ""
	}
	return w.a[w.i]
}

// Rest returns the remaining words joined by spaces (for messages).
func (w *words) Rest() string { return strings.Join(w.a[w.i:], " ") }

// Value returns the word after keyword key, or an error naming key when the
// line ends there.
func (w *words) Value(key string) (string, error) {
	if w.i >= len(w.a) {
		return "", fmt.Errorf("%s needs a value", Quote(key))
	}
	return w.Next(), nil
}
