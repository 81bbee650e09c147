package config

// `capture PORT [in|out|both] [count N] [filter EXPR...]`: netfwd's own
// control-socket query (not iproute2's): the port's frames, as received
// and as sent, streamed as pcap (internal/daemon capture.go). The filter
// is a tcpdump expression and takes the rest of the line.
//
// Locking: none (parsing).

import (
	"errors"
	"fmt"
	"strconv"
)

// Capture is a `capture` query.
type Capture struct {
	Port    string
	In, Out bool   // directions; both when neither word is given
	Count   uint64 // frames to capture (0: until the client goes)
	Filter  string // tcpdump expression ("": every frame)
}

func (Capture) Name() string { return "capture" }

var captureArgs = table("capture argument", kw("in"), kw("out"), kw("both"), kw("count"), kw("filter"), kw("help"))

func parseCapture(w *words) (Query, error) {
	var q Capture
	if !w.More() {
		return nil, errors.New("capture: missing port (capture PORT [in|out|both] [count N] [filter EXPR])")
	}
	q.Port = w.Next()
	if isHelpWord(q.Port) {
		return nil, errHelp
	}
	for w.More() {
		arg, err := captureArgs.must(w.Next())
		if err != nil {
			return nil, err
		}
		switch arg {
		case "help":
			return nil, errHelp
		case "in":
			q.In = true
		case "out":
			q.Out = true
		case "both":
			q.In, q.Out = true, true
		case "count":
			v, err := w.Value("count")
			if err != nil {
				return nil, err
			}
			if q.Count, err = strconv.ParseUint(v, 10, 64); err != nil || q.Count == 0 {
				return nil, fmt.Errorf("capture: count %s: want a positive number of frames", Quote(v))
			}
		case "filter":
			if !w.More() {
				return nil, errors.New("capture: filter: missing expression")
			}
			q.Filter = w.Rest()
			for w.More() {
				w.Next()
			}
		}
	}
	if !q.In && !q.Out {
		q.In, q.Out = true, true
	}
	return q, nil
}
