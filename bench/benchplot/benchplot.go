// Package benchplot draws the records of the benchmark suites as SVG
// figures, the way the seed documents present their tables: flood cost
// against VLANs x ports, FDB lookup against table size, FIB lookup per
// structure, veth forwarding against Linux per set-up. Each suite's
// baselines (naive flood, hash256, the raw tries, Linux) are drawn on the
// same axes as the implementation under test.
//
// Flow: records come from a run (netfwd-bench SUITE --svg DIR) or from saved
// JSON (ReadRecords, netfwd-bench plot); WriteDir groups them by suite and
// writes DIR/SUITE.svg, one figure of one or more plots per suite (Figure).
// Drawing uses gonum.org/v1/plot. Only cmd/netfwd-bench imports this
// package: the router's binary links no plotting (docs/architecture.md).
//
// Locking: none; plain functions over the records they are given.
package benchplot

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/netfwd/netfwd/bench"
)

// Tile sizes of one plot in a figure.
const (
	tileW = 6 * vg.Inch
	tileH = 4 * vg.Inch
)

func init() {
	// Sans-serif text reads better in small plots than gonum's default serif.
	plot.DefaultFont = font.Font{Typeface: "Liberation", Variant: "Sans"}
}

// ReadRecords decodes saved output of `netfwd-bench SUITE --json`: one or
// more JSON arrays of records (or single records), one after the other, as
// several runs appended to one file give.
func ReadRecords(r io.Reader) ([]bench.Record, error) {
	dec := json.NewDecoder(r)
	var recs []bench.Record
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return recs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("records: %w", err)
		}
		raw = bytes.TrimSpace(raw)
		if len(raw) > 0 && raw[0] == '[' {
			var rs []bench.Record
			if err := json.Unmarshal(raw, &rs); err != nil {
				return nil, fmt.Errorf("records: %w", err)
			}
			recs = append(recs, rs...)
			continue
		}
		var rec bench.Record
		if err := json.Unmarshal(raw, &rec); err != nil {
			return nil, fmt.Errorf("records: %w", err)
		}
		recs = append(recs, rec)
	}
}

// BySuite splits records by suite, keeping their order within a suite.
func BySuite(recs []bench.Record) map[string][]bench.Record {
	m := map[string][]bench.Record{}
	for _, r := range recs {
		m[r.Suite] = append(m[r.Suite], r)
	}
	return m
}

// WriteDir writes DIR/SUITE.svg for every suite among recs (DIR is created)
// and returns the files written. name, if not empty, replaces SUITE in the
// file name; it needs the records to be of one suite.
func WriteDir(dir, name string, recs []bench.Record) ([]string, error) {
	by := BySuite(recs)
	if len(by) == 0 {
		return nil, errors.New("plot: no records")
	}
	if name != "" && len(by) > 1 {
		return nil, fmt.Errorf("plot: a file name for records of %d suites", len(by))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	suites := make([]string, 0, len(by))
	for s := range by {
		suites = append(suites, s)
	}
	sort.Strings(suites)
	var files []string
	for _, s := range suites {
		svg, err := SVG(s, by[s])
		if err != nil {
			return files, err
		}
		stem := s
		if name != "" {
			stem = name
		}
		if stem == "" || strings.ContainsAny(stem, `/\`) {
			return files, fmt.Errorf("plot: bad file name %q", stem)
		}
		f := filepath.Join(dir, stem+".svg")
		if err := os.WriteFile(f, svg, 0o644); err != nil {
			return files, err
		}
		files = append(files, f)
	}
	return files, nil
}

// Figure is one suite's plots, drawn in a grid of Cols columns.
type Figure struct {
	Plots []*plot.Plot
	Cols  int
}

// SVG draws the figure of a suite's records.
func SVG(suite string, recs []bench.Record) ([]byte, error) {
	fig, err := Draw(suite, recs)
	if err != nil {
		return nil, err
	}
	return fig.SVG()
}

// Draw builds the figure of a suite's records; suites without a figure of
// their own get one dot per record (ns/op).
func Draw(suite string, recs []bench.Record) (*Figure, error) {
	var own []bench.Record
	for _, r := range recs {
		if r.Suite == suite {
			own = append(own, r)
		}
	}
	if len(own) == 0 {
		return nil, fmt.Errorf("plot %s: no records of the suite", suite)
	}
	var (
		ps  []*plot.Plot
		err error
	)
	switch suite {
	case "flood":
		ps, err = floodPlots(own)
	case "fdb":
		ps, err = fdbPlots(own)
	case "fib":
		ps, err = fibPlots(own)
	case "veth":
		ps, err = vethPlots(own)
	case "ndr":
		ps, err = ndrPlots(own)
	case "mcast":
		ps, err = mcastPlots(own)
	case "pipeline":
		ps, err = pipelinePlots(own)
	default:
		ps, err = genericPlots(suite, own)
	}
	if err != nil {
		return nil, fmt.Errorf("plot %s: %w", suite, err)
	}
	if len(ps) == 0 {
		return nil, fmt.Errorf("plot %s: nothing to draw in %d records", suite, len(own))
	}
	cols := len(ps)
	if cols > 3 {
		cols = 3
	}
	if env := envLine(own); env != "" {
		ps[0].Title.Text += "\n" + env
	}
	return &Figure{Plots: ps, Cols: cols}, nil
}

// SVG renders the figure, its plots aligned in a grid.
func (f *Figure) SVG() ([]byte, error) {
	if len(f.Plots) == 0 || f.Cols <= 0 {
		return nil, errors.New("plot: empty figure")
	}
	rows := (len(f.Plots) + f.Cols - 1) / f.Cols
	grid := make([][]*plot.Plot, rows)
	for i := range grid {
		grid[i] = make([]*plot.Plot, f.Cols)
	}
	for i, p := range f.Plots {
		grid[i/f.Cols][i%f.Cols] = p
	}
	c := vgsvg.New(tileW*vg.Length(f.Cols), tileH*vg.Length(rows))
	dc := draw.New(c)
	t := draw.Tiles{Rows: rows, Cols: f.Cols, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(grid, t, dc)
	for j := range grid {
		for i, p := range grid[j] {
			if p != nil {
				p.Draw(canvases[j][i])
			}
		}
	}
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return nil, err
	}
	// vgsvg names the font alone; a viewer without Liberation Sans would
	// fall back to a serif font of other widths. Arial has its metrics.
	return bytes.ReplaceAll(b.Bytes(), []byte("font-family:Liberation Sans;"),
		[]byte("font-family:'Liberation Sans',Arial,Helvetica,sans-serif;")), nil
}

// envLine names the machine the records came from (the first record with one).
func envLine(recs []bench.Record) string {
	for _, r := range recs {
		if r.Env != nil {
			return fmt.Sprintf("%s, %d CPUs, GOAMD64=%s, %s", r.Env.CPU, r.Env.CPUs, r.Env.GOAMD64, r.Env.Go)
		}
	}
	return ""
}
