package config

// Positions and errors: every problem is reported as FILE:LINE: reason, and
// error output stays small whatever the input: a reason quotes at most a
// short prefix of what it quotes (Quote), and a list of errors keeps its
// first MaxErrors entries and counts the rest (ErrorList), so a 20 MB
// binary file or a 10 MiB control socket line yields a few kilobytes of
// errors, not a copy of the input.
//
// Locking: none.

import (
	"errors"
	"fmt"
	"strconv"
)

// Pos is where a command came from.
type Pos struct {
	File string
	Line int
}

func (p Pos) String() string { return fmt.Sprintf("%s:%d", p.File, p.Line) }

// Error is one problem with one line.
type Error struct {
	Pos Pos
	Err error
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %v", e.Pos, e.Err) }
func (e *Error) Unwrap() error { return e.Err }

// maxQuote is the longest input prefix an error message quotes.
const maxQuote = 64

// Quote quotes s for an error message (strconv.Quote), keeping at most a
// short prefix of it: "abc..." (20971520 bytes).
func Quote(s string) string {
	if len(s) <= maxQuote {
		return strconv.Quote(s)
	}
	cut := maxQuote
	for cut > 0 && s[cut]&0xc0 == 0x80 { // do not split a UTF-8 sequence
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(s[:cut]), len(s))
}

// MaxErrors is how many errors a file, a reload or a control request
// reports in full; the rest are counted.
const MaxErrors = 100

// ErrorList collects the errors of one input: the first MaxErrors, and how
// many more there were.
type ErrorList struct {
	File  string // named in the "more errors" line
	errs  []error
	extra int
	last  int // the highest line of an error not kept
}

// Add records an error.
func (l *ErrorList) Add(err error) {
	if len(l.errs) < MaxErrors {
		l.errs = append(l.errs, err)
		return
	}
	l.extra++
	var e *Error
	if errors.As(err, &e) && e.Pos.Line > l.last {
		l.last = e.Pos.Line
	}
}

// Len is the number of errors added.
func (l *ErrorList) Len() int { return len(l.errs) + l.extra }

// Errors returns the kept errors, followed by one that counts the others
// (positioned at the last of them, so that sorting by line keeps it last).
func (l *ErrorList) Errors() []error {
	if l.extra == 0 {
		return l.errs
	}
	more := &Error{Pos{l.File, l.last}, fmt.Errorf("%d more errors up to this line not shown", l.extra)}
	return append(l.errs[:len(l.errs):len(l.errs)], more)
}

// Err joins the errors (nil without any).
func (l *ErrorList) Err() error { return errors.Join(l.Errors()...) }
