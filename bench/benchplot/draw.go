package benchplot

// The building blocks of the suites' plots: named series (a baseline is
// drawn dashed with hollow marks, so it reads as the "before" on the same
// axes), lines over a nominal or numeric X, dot plots (one row per case, the
// value on a log X) and grouped bars; and reading params that come either
// from a run (ints) or from JSON (float64).

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// series is one named set of points.
type series struct {
	name     string
	xys      plotter.XYs
	baseline bool
}

// num reads a numeric param (int from a run, float64 from JSON).
func num(m map[string]any, k string) (float64, bool) {
	switch v := m[k].(type) {
	case float64:
		return v, true
	case float32:
		return float64(v), true
	case int:
		return float64(v), true
	case int64:
		return float64(v), true
	case uint64:
		return float64(v), true
	case uint32:
		return float64(v), true
	case int32:
		return float64(v), true
	}
	return 0, false
}

// str reads a param as text ("" when absent).
func str(m map[string]any, k string) string {
	v, ok := m[k]
	if !ok || v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

// paramText is "k=v k=v" over sorted keys, leaving out skip.
func paramText(m map[string]any, skip ...string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		if !contains(skip, k) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + fmt.Sprint(m[k])
	}
	return strings.Join(parts, " ")
}

func contains[T comparable](ss []T, s T) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// legendName marks a baseline in the legend.
func legendName(s series) string {
	if s.baseline {
		return s.name + " (baseline)"
	}
	return s.name
}

// addLines draws each series as a line with marks, baselines dashed.
func addLines(p *plot.Plot, ss []series) error {
	for i, s := range ss {
		if len(s.xys) == 0 {
			continue
		}
		l, sc, err := plotter.NewLinePoints(s.xys)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		style(l, sc, i, s.baseline)
		p.Add(l, sc)
		p.Legend.Add(legendName(s), l, sc)
	}
	return nil
}

func style(l *plotter.Line, sc *plotter.Scatter, i int, baseline bool) {
	c := plotutil.Color(i)
	sc.GlyphStyle.Color = c
	sc.GlyphStyle.Radius = vg.Points(3)
	sc.GlyphStyle.Shape = plotutil.Shape(i)
	if l != nil {
		l.LineStyle.Color = c
		l.LineStyle.Width = vg.Points(1.5)
		if baseline {
			l.LineStyle.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
	}
	if baseline {
		sc.GlyphStyle.Shape = draw.RingGlyph{}
	}
}

// logY and logX put an axis on a log scale.
func logY(p *plot.Plot) {
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = logTicks{}
}

func logX(p *plot.Plot) {
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = logTicks{}
}

// logTicks labels 1, 2 and 5 of each decade (only 1 over more than three
// decades), with minor ticks between: gonum's LogTicks labels powers of ten
// only, which leaves a one-decade axis with a single label.
type logTicks struct{}

func (logTicks) Ticks(min, max float64) []plot.Tick {
	if !(min > 0) || !(max >= min) {
		return nil
	}
	lo, hi := math.Floor(math.Log10(min)), math.Ceil(math.Log10(max))
	labeled := []float64{1, 2, 5}
	if hi-lo > 3 {
		labeled = []float64{1}
	}
	var ts []plot.Tick
	for e := lo; e <= hi; e++ {
		base := math.Pow(10, e)
		for m := 1.0; m < 10; m++ {
			v := m * base
			if v < min*(1-1e-9) || v > max*(1+1e-9) {
				continue
			}
			t := plot.Tick{Value: v}
			if contains(labeled, m) {
				t.Label = strconv.FormatFloat(v, 'g', 4, 64)
				if v >= 1 && v < 1e7 {
					t.Label = strconv.FormatFloat(v, 'f', -1, 64)
				}
			}
			ts = append(ts, t)
		}
	}
	return ts
}

// padLog widens a log axis by a factor each side, so marks at the ends are
// not cut in half.
func padLog(a *plot.Axis, lo, hi float64) {
	if a.Min > 0 {
		a.Min /= lo
	}
	a.Max *= hi
}

// dotPlot draws one row per label (first label on top) and one mark per
// series in a row: X is the value, on a log scale when every value is > 0.
func dotPlot(title, xlabel string, labels []string, ss []series) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	positive := true
	for i := range ss {
		for j := range ss[i].xys {
			// Rows count down so the first label is drawn on top.
			ss[i].xys[j].Y = float64(len(labels)-1) - ss[i].xys[j].Y
			if ss[i].xys[j].X <= 0 {
				positive = false
			}
		}
	}
	if positive {
		logX(p)
	}
	for i, s := range ss {
		if len(s.xys) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(s.xys)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		style(nil, sc, i, s.baseline)
		sc.GlyphStyle.Radius = vg.Points(3.5)
		p.Add(sc)
		if len(ss) > 1 {
			p.Legend.Add(legendName(s), sc)
		}
	}
	if positive {
		// Room on the right for the legend when there is one.
		hi := 1.3
		if len(ss) > 1 {
			hi = 4
		}
		padLog(&p.X, 1.3, hi)
	}
	rev := make([]string, len(labels))
	for i, l := range labels {
		rev[len(labels)-1-i] = l
	}
	p.NominalY(rev...)
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	return p, nil
}

// barGroups draws grouped bars: one group per X label, one bar per series
// (series i's value for label j is xys[j].Y; missing labels are 0).
func barGroups(p *plot.Plot, labels []string, ss []series) error {
	if len(ss) == 0 || len(labels) == 0 {
		return fmt.Errorf("no bars")
	}
	w := vg.Length(float64(tileW) * 0.7 / float64(len(labels)*len(ss)))
	if w > vg.Points(30) {
		w = vg.Points(30)
	}
	for i, s := range ss {
		vals := make(plotter.Values, len(labels))
		for _, xy := range s.xys {
			j := int(xy.X)
			if j >= 0 && j < len(vals) {
				vals[j] = xy.Y
			}
		}
		b, err := plotter.NewBarChart(vals, w)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		b.LineStyle.Width = vg.Length(0)
		b.Color = plotutil.Color(i)
		b.Offset = vg.Length(float64(i)-float64(len(ss)-1)/2) * w
		p.Add(b)
		if len(ss) > 1 {
			p.Legend.Add(legendName(s), b)
		}
	}
	p.NominalX(labels...)
	p.X.Min, p.X.Max = -0.6, float64(len(labels))-0.4
	p.Y.Min = 0
	p.Y.Max *= 1.3 // headroom for the legend
	p.Legend.Top = true
	return nil
}

// slantX tilts long nominal X labels.
func slantX(p *plot.Plot) {
	p.X.Tick.Label.Rotation = math.Pi / 6
	p.X.Tick.Label.XAlign = draw.XRight
	p.X.Tick.Label.YAlign = draw.YTop
}

// sameY gives plots one Y range, so panels side by side compare.
func sameY(ps []*plot.Plot) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, p := range ps {
		lo, hi = math.Min(lo, p.Y.Min), math.Max(hi, p.Y.Max)
	}
	for _, p := range ps {
		p.Y.Min, p.Y.Max = lo, hi
	}
}

// order keeps first-seen order of keys.
type order struct {
	keys []string
	seen map[string]int
}

func (o *order) add(k string) int {
	if o.seen == nil {
		o.seen = map[string]int{}
	}
	if i, ok := o.seen[k]; ok {
		return i
	}
	o.seen[k] = len(o.keys)
	o.keys = append(o.keys, k)
	return len(o.keys) - 1
}
