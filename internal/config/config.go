// Package config is netfwd's one reader of command lines: the syntax of an
// `ip -batch` file (plus `bridge ...` lines), one command per line, `#`
// comments. The daemon's config file, its reloads, the control socket and
// `route get --config` all read lines here, with one abbreviation rule,
// iproute2's (keywords.go): `ip r g ADDR`, `route s`, `rou show`,
// `ip -j r s` and `link show up` mean what they mean to iproute2, wherever
// they are read.
//
// Flow: ParseLine turns one line into a Command: configuration (a route,
// address, nexthop, rule, link, bridge or neighbour change, checked for syntax
// here and for meaning by the applier, internal/apply) or a query (a typed
// value of query.go, answered by internal/show). Parse and Stream read whole
// texts and report every bad line as FILE:LINE: reason, with bounded output
// (errors.go).
//
// Locking: none; parsing is pure.
package config

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Command is one parsed line.
type Command struct {
	Pos  Pos
	Text string // the line as written, for messages
	// JSON is set by `-j` on the line (`ip -j route show`): the query's
	// answer is JSON.
	JSON bool
	// Stats and Brief are `-s` and `-br` on the line (`ip -s link`,
	// `ip -br address`); parseCommand passes them to the query they shape.
	Stats, Brief bool
	// Exactly one of these is set.
	Route   *RouteCmd
	Addr    *AddrCmd
	Nexthop *NexthopCmd
	Link    *LinkCmd
	Bridge  *BridgeCmd
	Neigh   *NeighCmd
	Rule    *RuleCmd
	Query   Query
}

// MaxLine is the longest line read (longer ones are an error).
const MaxLine = 1 << 20

// Parse reads a whole config text. It returns the commands of all lines that
// parsed and an error for each line that did not (at most MaxErrors of
// them in full, see ErrorList).
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
// or that fn refused (bounded as ErrorList does); lines after an error are
// still parsed and handed on, so the caller sees every problem (and aborts
// its transaction). fn must not keep c: it is the same variable for every
// line (one allocation per file, not per line).
func Stream(file string, r io.Reader, fn func(c *Command) error) []error {
	errs := ErrorList{File: file}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), MaxLine)
	n := 0
	var cmd Command
	for sc.Scan() {
		n++
		pos := Pos{file, n}
		var ok bool
		var err error
		cmd, ok, err = parseLine(pos, sc.Text(), true)
		if err == nil && ok {
			err = fn(&cmd)
		}
		if err != nil {
			errs.Add(&Error{pos, err})
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			err = fmt.Errorf("line longer than %d bytes (the rest of the file is not read)", MaxLine)
		}
		errs.Add(&Error{Pos{file, n + 1}, err})
	}
	return errs.Errors()
}

// ParseLine parses one line of a request (the control socket, `netfwd
// route`); ok is false for blank and comment lines.
func ParseLine(pos Pos, line string) (cmd Command, ok bool, err error) {
	return parseLine(pos, line, false)
}

// parseLine parses one line; cfg says it is a config file's (Stream).
func parseLine(pos Pos, line string, cfg bool) (cmd Command, ok bool, err error) {
	if len(line) > MaxLine {
		return Command{}, false, fmt.Errorf("line longer than %d bytes", MaxLine)
	}
	if i := strings.IndexByte(line, '#'); i >= 0 {
		line = line[:i]
	}
	var buf [32]string // the words of most lines, without an allocation
	w := &words{a: appendFields(buf[:0], line), cfg: cfg}
	if !w.More() {
		return Command{}, false, nil
	}
	cmd = Command{Pos: pos, Text: strings.TrimSpace(line)}
	if last := w.a[len(w.a)-1]; last == "?" || last == "help" {
		// `route show help`, `bridge fdb ?`: the help of that level.
		cmd.Query = Help{Text: helpFor(w.a[:len(w.a)-1])}
		return cmd, true, nil
	}
	if err := parseCommand(&cmd, w); err != nil {
		if err == errHelp { // an abbreviation of help where a command word stands (`route h`)
			cmd.Query = Help{Text: helpFor(w.a[:w.i-1])}
			return cmd, true, nil
		}
		return Command{}, false, err
	}
	switch q := cmd.Query.(type) {
	case LinkShow:
		q.Stats, q.Brief = cmd.Stats, cmd.Brief
		cmd.Query = q
	case AddrShow:
		q.Brief = cmd.Brief
		cmd.Query = q
	}
	return cmd, true, nil
}

// parseCommand reads `[ip] [OPTIONS] OBJECT ...` or `bridge [OPTIONS]
// OBJECT ...`.
func parseCommand(cmd *Command, w *words) error {
	switch w.Peek() {
	case "bridge":
		w.Next()
		return parseBridgeCommand(cmd, w)
	case "ip":
		w.Next()
	}
	if err := readOptions(cmd, w, ipOptions, nil); err != nil {
		return err
	}
	if !w.More() {
		return errors.New("missing object")
	}
	word := w.Next()
	obj, err := ipObjects.mustIn(word, w.cfg)
	if err != nil {
		return err
	}
	switch obj {
	case "help":
		return errHelp
	case "monitor":
		cmd.Query, err = parseMonitor(w, monitorObjects)
		return err
	case "capture":
		cmd.Query, err = parseCapture(w)
		return err
	case "trace":
		cmd.Query, err = parseTrace(w)
		return err
	case "route":
		return parseRoute(cmd, w)
	case "rule":
		return parseRule(cmd, w)
	case "vrfs":
		return parseVRF(cmd, w)
	case "address":
		return parseAddr(cmd, w)
	case "nexthop":
		return parseNexthop(cmd, w)
	case "link":
		return parseLink(cmd, w)
	case "neigh":
		return parseNeigh(cmd, w)
	case "stats":
		cmd.Query, err = parseStats(w)
		return err
	case "reload":
		if w.More() {
			return fmt.Errorf("reload: unexpected %s", Quote(w.Next()))
		}
		cmd.Query = Reload{}
		return nil
	case "bridge":
		return parseBridgeCommand(cmd, w)
	case "bridge-fdb":
		return parseBridgeFDB(cmd, w)
	case "bridge-vlan":
		return parseBridgeVLAN(cmd, w, false)
	}
	return fmt.Errorf("unknown object %s", Quote(word))
}

// readOptions reads the options before the object (`ip -j -4 route ...`,
// `bridge -j -compressvlans vlan show`): -j asks for JSON answers, -4 is
// the only family netfwd has, compress is set by -compressvlans.
func readOptions(cmd *Command, w *words, t *keywords, compress *bool) error {
	for w.More() && strings.HasPrefix(w.Peek(), "-") {
		opt := w.Next()
		if opt == "--" {
			return nil
		}
		if strings.HasPrefix(opt, "--") {
			opt = opt[1:]
		}
		means, err := t.must(opt)
		if err != nil {
			return err
		}
		switch means {
		case "-json":
			cmd.JSON = true
		case "-6":
			return errors.New("netfwd is IPv4 only (-6)")
		case "-compressvlans":
			*compress = true
		case "-stats":
			cmd.Stats = true
		case "-brief":
			cmd.Brief = true
		}
	}
	return nil
}

// parseBridgeCommand reads the rest of `bridge [OPTIONS] OBJECT ...`.
func parseBridgeCommand(cmd *Command, w *words) error {
	compress := false
	if err := readOptions(cmd, w, bridgeOptions, &compress); err != nil {
		return err
	}
	if !w.More() {
		return errors.New("bridge: missing object")
	}
	obj, err := bridgeObjects.mustIn(w.Next(), w.cfg)
	if err != nil {
		return err
	}
	switch obj {
	case "help":
		return errHelp
	case "monitor":
		cmd.Query, err = parseMonitor(w, bridgeMonitorObjects)
		return err
	case "vlan":
		return parseBridgeVLAN(cmd, w, compress)
	case "fdb":
		return parseBridgeFDB(cmd, w)
	case "link":
		return parseBridgeLink(cmd, w)
	default: // mdb
		return parseBridgeMDB(cmd, w)
	}
}

// verb reads an object's command word (`add`, `del`, `show`, ...) from the
// object's table; with no word left, iproute2 lists (dflt).
func verb(w *words, t *keywords, dflt string) (string, error) {
	if !w.More() {
		if dflt == "" || w.cfg && queryMeanings[dflt] {
			return "", fmt.Errorf("missing %s (want %s)", t.what, t.supported(w.cfg))
		}
		return dflt, nil
	}
	word := w.Next()
	if k, ok := t.find(word); ok && k.word == "help" {
		return "", errHelp
	}
	return t.mustIn(word, w.cfg)
}

// parseMonitor reads `monitor [all | OBJECT...]` (t: ip's or bridge's
// objects). Without an object every object is followed; `all` does the
// same and prefixes each line with its [ROUTE]-style banner, as ipmonitor.c
// sets prefix_banner for `all` only.
func parseMonitor(w *words, t *keywords) (Query, error) {
	var q Monitor
	for w.More() {
		obj, err := t.must(w.Next())
		if err != nil {
			return nil, err
		}
		switch obj {
		case "help":
			return nil, errHelp
		case "all":
			q.All = true
		case "route":
			q.Objects |= MonitorRoute
		case "neigh":
			q.Objects |= MonitorNeigh
		case "link":
			q.Objects |= MonitorLink
		case "fdb":
			q.Objects |= MonitorFDB
		}
	}
	if q.All || q.Objects == 0 {
		q.Objects = MonitorAll
		if t == bridgeMonitorObjects {
			q.Objects = MonitorLink | MonitorFDB
		}
	}
	return q, nil
}
