package benchplot

// ndr: the zero-loss suite's figure (bench/ndr.go), as the RFC 2544 reports
// and the seeds' plots draw it: the loss curve of each forwarder (offered
// rate, as a share of the generator's ceiling, against frames lost) and the
// NDR per forwarder beside Linux's, measured in the same run.

import (
	"fmt"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"

	"github.com/netfwd/netfwd/bench"
)

func ndrPlots(recs []bench.Record) ([]*plot.Plot, error) {
	curves := map[string]plotter.XYs{}
	var impls order
	ndr := map[string]float64{}
	for _, r := range recs {
		switch str(r.Params, "point") {
		case "curve":
			pct, ok := num(r.Params, "offered_pct")
			loss, ok2 := num(r.Extra, "loss_pct")
			if !ok || !ok2 {
				continue
			}
			impls.add(r.Impl)
			curves[r.Impl] = append(curves[r.Impl], plotter.XY{X: pct, Y: loss})
		case "ndr":
			impls.add(r.Impl)
			ndr[r.Impl] = r.Mops * 1000
		}
	}
	if len(curves) == 0 {
		return nil, fmt.Errorf("no loss curve records (params point=curve)")
	}
	p := plot.New()
	p.Title.Text = "ndr: frames lost against the offered rate (bursty trafgen -b)"
	p.X.Label.Text = "offered, % of the generator's ceiling"
	p.Y.Label.Text = "lost, %"
	for i, impl := range impls.keys {
		xys := curves[impl]
		if len(xys) == 0 {
			continue
		}
		sort.Slice(xys, func(a, b int) bool { return xys[a].X < xys[b].X })
		l, pts, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, err
		}
		l.Color = plotutil.Color(i)
		pts.Color = plotutil.Color(i)
		pts.Shape = plotutil.Shape(i)
		p.Add(l, pts)
		p.Legend.Add(impl, l, pts)
	}
	p.Legend.Top = true
	p.Legend.Left = true
	q := plot.New()
	q.Title.Text = "ndr: zero-loss rate per forwarder"
	q.Y.Label.Text = "kpps"
	labels := make([]string, len(impls.keys))
	s := series{name: "NDR"}
	for i, impl := range impls.keys {
		labels[i] = impl
		if impl == "linux" {
			labels[i] = "linux (baseline)"
		}
		s.xys = append(s.xys, plotter.XY{X: float64(i), Y: ndr[impl]})
	}
	if err := barGroups(q, labels, []series{s}); err != nil {
		return nil, err
	}
	slantX(q)
	return []*plot.Plot{p, q}, nil
}
