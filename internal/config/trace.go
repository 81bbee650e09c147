package config

// `trace [port P] [count N] [filter EXPR]`: netfwd's own control-socket
// query (VPP's `trace add`): the next N frames received (on port P, that
// match the tcpdump expression) are traced through the datapath, and each
// one's decisions are printed (internal/daemon trace.go).
//
// Locking: none (parsing).

import (
	"errors"
	"fmt"
	"strconv"
)

// DefaultTraceCount is how many frames `trace` follows without `count`.
const DefaultTraceCount = 10

// MaxTraceCount bounds one trace (each traced frame is worked alone).
const MaxTraceCount = 1000

// Trace is a `trace` query.
type Trace struct {
	Port   string // "": any port
	Count  int
	Filter string // tcpdump expression ("": every frame)
}

func (Trace) Name() string { return "trace" }

var traceArgs = table("trace argument", kw("port"), kw("count"), kw("filter"), kw("help"))

func parseTrace(w *words) (Query, error) {
	q := Trace{Count: DefaultTraceCount}
	for w.More() {
		arg, err := traceArgs.must(w.Next())
		if err != nil {
			return nil, err
		}
		switch arg {
		case "help":
			return nil, errHelp
		case "port":
			if q.Port, err = w.Value("port"); err != nil {
				return nil, err
			}
		case "count":
			v, err := w.Value("count")
			if err != nil {
				return nil, err
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > MaxTraceCount {
				return nil, fmt.Errorf("trace: count %s: want 1 to %d frames", Quote(v), MaxTraceCount)
			}
			q.Count = n
		case "filter":
			if !w.More() {
				return nil, errors.New("trace: filter: missing expression")
			}
			q.Filter = w.Rest()
			for w.More() {
				w.Next()
			}
		}
	}
	return q, nil
}
