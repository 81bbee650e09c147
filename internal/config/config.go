// Package config reads netfwd's configuration: the line syntax of an
// `ip -batch` file (plus `bridge ...` lines), one command per line, `#`
// comments. The same reader serves the daemon's config file, the control
// socket and `route get --config`.
//
// Flow: Parse turns text into commands, checking syntax line by line and
// collecting every error as FILE:LINE: reason. Apply then runs the commands
// against a transaction of the state they change; a command that fails there
// is reported the same way, and the caller aborts the whole transaction if
// anything failed, so a file is applied entirely or not at all.
//
// Locking: none; parsing is pure, applying runs inside the caller's
// transaction.
package config

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
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

// Command is one parsed line.
type Command struct {
	Pos  Pos
	Text string // the line as written, for messages
	// Exactly one of these is set.
	Route   *RouteCmd
	Addr    *AddrCmd
	Nexthop *NexthopCmd
	Link    *LinkCmd
	Bridge  *BridgeCmd
	Neigh   *NeighCmd
}

// Parse reads a whole config text. It returns the commands of all lines that
// parsed and an error for each line that did not.
func Parse(file string, r io.Reader) ([]Command, []error) {
	var cmds []Command
	errs := Stream(file, r, func(c *Command) error {
		cmds = append(cmds, *c)
		return nil
	})
	return cmds, errs
}

// Stream parses a config text line by line and hands each command to fn,
// without keeping them: a 900,000-line route file goes straight into the
// transaction. It returns one positioned error per line that failed to parse
// or that fn refused; lines after an error are still parsed and handed on,
// so the caller sees every problem (and aborts its transaction).
func Stream(file string, r io.Reader, fn func(*Command) error) []error {
	var errs []error
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	n := 0
	for sc.Scan() {
		n++
		pos := Pos{file, n}
		cmd, ok, err := ParseLine(pos, sc.Text())
		if err == nil && ok {
			err = fn(&cmd)
		}
		if err != nil {
			errs = append(errs, &Error{pos, err})
		}
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, &Error{Pos{file, n + 1}, err})
	}
	return errs
}

// ParseLine parses one line; ok is false for blank and comment lines.
func ParseLine(pos Pos, line string) (cmd Command, ok bool, err error) {
	if i := strings.IndexByte(line, '#'); i >= 0 {
		line = line[:i]
	}
	args := strings.Fields(line)
	if len(args) == 0 {
		return Command{}, false, nil
	}
	if args[0] == "ip" { // tolerate full `ip ...` command lines
		args = args[1:]
	}
	for len(args) > 0 && (args[0] == "-4" || args[0] == "-b" || args[0] == "-batch") {
		args = args[1:]
	}
	if len(args) == 0 {
		return Command{}, false, fmt.Errorf("missing object")
	}
	cmd = Command{Pos: pos, Text: strings.TrimSpace(line)}
	obj, rest := args[0], args[1:]
	switch {
	case matches(obj, "route", 1):
		cmd.Route, err = parseRoute(rest)
	case matches(obj, "address", 1) || obj == "addr":
		cmd.Addr, err = parseAddr(rest)
	case obj == "nexthop" || obj == "nh":
		cmd.Nexthop, err = parseNexthop(rest)
	case matches(obj, "link", 1):
		cmd.Link, err = parseLink(rest)
	case obj == "bridge":
		cmd.Bridge, err = parseBridge(rest)
	case matches(obj, "neighbour", 1) || matches(obj, "neighbor", 1) || obj == "neigh":
		cmd.Neigh, err = parseNeigh(rest)
	default:
		err = fmt.Errorf("unknown object %q (want route, address, nexthop, link, neigh or bridge)", obj)
	}
	return cmd, err == nil, err
}

// matches is iproute2's abbreviation rule: s is a prefix of word, at least
// min characters long.
func matches(s, word string, min int) bool {
	return len(s) >= min && len(s) <= len(word) && word[:len(s)] == s
}

// command reads the verb of an object's line (args[0]) with iproute2's
// abbreviations and aliases: "del" is "delete", "list" is "show".
func command(object string, args []string, allowed ...string) (string, error) {
	if len(args) == 0 {
		return "", errors.New(object + ": missing command")
	}
	op, err := verb(args[0], allowed...)
	switch op {
	case "del":
		op = "delete"
	case "list":
		op = "show"
	}
	return op, err
}

// verb maps an iproute2 verb (abbreviations allowed) to its canonical name.
func verb(s string, allowed ...string) (string, error) {
	for _, v := range allowed {
		if s == v {
			return v, nil
		}
	}
	for _, v := range allowed {
		min := 1
		if v == "delete" || v == "del" {
			min = 3
		}
		if v == "change" || v == "replace" || v == "append" {
			min = 3
		}
		if matches(s, v, min) {
			return v, nil
		}
	}
	return "", fmt.Errorf("unknown command %q (want %s)", s, strings.Join(allowed, ", "))
}
