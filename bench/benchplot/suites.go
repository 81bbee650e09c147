package benchplot

// One function per suite: which records go on which axes. Each follows the
// seed the suite reproduces (design.md, docs/benchmarks.md):
//   - flood: seed 000's table, cost per flooded frame against ports/members,
//     one panel per VLAN count; naive (every port, a VLAN lookup each) is
//     the baseline.
//   - fdb: seed 003's comparison, lookup and learn cost against the table's
//     size on log axes; hash256 (the fixed 256-bucket hash) is the baseline.
//   - fib: seed 004's lookup per structure, one row per structure, hot and
//     random probes; the raw tries and the split local/main lookup are the
//     baselines of the merged and compiled ones; the rules rows (LookupFlow
//     with N policy routing rules) are labelled with N. Update latencies and
//     build costs in a second panel.
//   - veth: forwarding rate per forwarder in each set-up, and the same as a
//     ratio to Linux (the baseline) in the same run.
//   - mcast, pipeline: cost per frame per case.
//   - any other suite: one dot per record, ns/op.

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/netfwd/netfwd/bench"
)

func floodPlots(recs []bench.Record) ([]*plot.Plot, error) {
	type cell struct{ ports, members int }
	vidSet := map[int]bool{}
	cells := map[int]map[cell]bool{}
	ns := map[string]map[[3]int]float64{} // impl -> {vids, ports, members} -> ns
	for _, r := range recs {
		v, ok1 := num(r.Params, "vids")
		pt, ok2 := num(r.Params, "ports")
		m, ok3 := num(r.Params, "members")
		if !ok1 || !ok2 || !ok3 || r.NsOp <= 0 {
			continue
		}
		vidSet[int(v)] = true
		if cells[int(v)] == nil {
			cells[int(v)] = map[cell]bool{}
		}
		cells[int(v)][cell{int(pt), int(m)}] = true
		if ns[r.Impl] == nil {
			ns[r.Impl] = map[[3]int]float64{}
		}
		ns[r.Impl][[3]int{int(v), int(pt), int(m)}] = r.NsOp
	}
	vids := sortedInts(vidSet)
	impls := implOrder(ns, "naive")
	var ps []*plot.Plot
	for _, v := range vids {
		var cs []cell
		for c := range cells[v] {
			cs = append(cs, c)
		}
		sort.Slice(cs, func(i, j int) bool {
			if cs[i].ports != cs[j].ports {
				return cs[i].ports < cs[j].ports
			}
			return cs[i].members < cs[j].members
		})
		labels := make([]string, len(cs))
		for i, c := range cs {
			labels[i] = fmt.Sprintf("%d/%d", c.ports, c.members)
		}
		var ss []series
		for _, impl := range impls {
			s := series{name: impl, baseline: impl == "naive"}
			for i, c := range cs {
				if x, ok := ns[impl][[3]int{v, c.ports, c.members}]; ok {
					s.xys = append(s.xys, plotter.XY{X: float64(i), Y: x})
				}
			}
			ss = append(ss, s)
		}
		p := plot.New()
		p.Title.Text = fmt.Sprintf("flood: %d VLAN(s) per port", v)
		p.X.Label.Text = "ports / VLAN members"
		p.Y.Label.Text = "ns per flooded frame"
		logY(p)
		if err := addLines(p, ss); err != nil {
			return nil, err
		}
		p.NominalX(labels...)
		p.X.Min, p.X.Max = -0.3, float64(len(labels))-0.7
		p.Add(plotter.NewGrid())
		p.Legend.Top, p.Legend.Left = true, true
		ps = append(ps, p)
	}
	if len(ps) > 0 {
		ps[0].Title.Text = "flood cost against VLANs x ports (seed 000)\n" + ps[0].Title.Text
		sameY(ps)
		for _, p := range ps {
			padLog(&p.Y, 1.2, 1.6)
		}
	}
	return ps, nil
}

func fdbPlots(recs []bench.Record) ([]*plot.Plot, error) {
	// op -> series name -> entries -> ns
	data := map[string]map[string]map[float64]float64{}
	entries := map[float64]bool{}
	put := func(op, name string, n, v float64) {
		if v <= 0 {
			return
		}
		if data[op] == nil {
			data[op] = map[string]map[float64]float64{}
		}
		if data[op][name] == nil {
			data[op][name] = map[float64]float64{}
		}
		data[op][name][n] = v
		entries[n] = true
	}
	for _, r := range recs {
		n, ok := num(r.Params, "entries")
		op := str(r.Params, "op")
		if !ok || n <= 0 || op == "" {
			continue
		}
		put(op, r.Impl, n, r.NsOp)
		if u, ok := num(r.Extra, "lookup_uniform_ns"); ok && op == "lookup" {
			put(op, r.Impl+", uniform probes", n, u)
		}
	}
	ticks := entryTicks(entries)
	var ps []*plot.Plot
	for _, op := range []string{"lookup", "learn"} {
		if data[op] == nil {
			continue
		}
		var ss []series
		for _, name := range implOrder(data[op], "hash256", "fdb", "hash256, uniform probes") {
			s := series{name: name, baseline: strings.HasPrefix(name, "hash256")}
			ns := sortedFloats(data[op][name])
			for _, n := range ns {
				s.xys = append(s.xys, plotter.XY{X: n, Y: data[op][name][n]})
			}
			ss = append(ss, s)
		}
		p := plot.New()
		p.Title.Text = "FDB " + op + " against table size"
		p.X.Label.Text = "entries"
		p.Y.Label.Text = "ns per " + op
		logX(p)
		logY(p)
		p.X.Tick.Marker = ticks
		if err := addLines(p, ss); err != nil {
			return nil, err
		}
		p.Add(plotter.NewGrid())
		p.Legend.Top, p.Legend.Left = true, true
		padLog(&p.X, 1.15, 1.15)
		padLog(&p.Y, 1.3, 2)
		ps = append(ps, p)
	}
	if len(ps) > 0 {
		ps[0].Title.Text = "seed 003: " + ps[0].Title.Text
	}
	return ps, nil
}

// entryTicks labels the measured table sizes (1K, 30K, 1M).
func entryTicks(set map[float64]bool) plot.ConstantTicks {
	var t plot.ConstantTicks
	for _, n := range sortedFloats(set) {
		t = append(t, plot.Tick{Value: n, Label: humanCount(n)})
	}
	return t
}

func humanCount(n float64) string {
	switch {
	case n >= 1e6 && int64(n)%1e5 == 0:
		return strconv.FormatFloat(n/1e6, 'f', -1, 64) + "M"
	case n >= 1e3 && int64(n)%100 == 0:
		return strconv.FormatFloat(n/1e3, 'f', -1, 64) + "K"
	}
	return strconv.FormatFloat(n, 'f', -1, 64)
}

// fibBaselines are the structures the merged and compiled lookups replace.
var fibBaselines = map[string]bool{"bart-fast-raw": true, "bart-table-raw": true, "split": true}

func fibPlots(recs []bench.Record) ([]*plot.Plot, error) {
	var rows, probes order
	type pt struct {
		row, probe int
		ns         float64
	}
	var pts []pt
	baselineRow := map[int]bool{}
	var updRows order
	var upd plotter.XYs
	routes := ""
	for _, r := range recs {
		if r.NsOp <= 0 {
			continue
		}
		if probe := str(r.Params, "probe"); probe != "" {
			if n, ok := num(r.Params, "routes"); ok && routes == "" {
				routes = fmt.Sprintf(", %.0f routes", n)
			}
			label := r.Impl
			if n, ok := num(r.Params, "rules"); ok { // policy routing: one row per rule count
				label += fmt.Sprintf(" %.0f", n)
			}
			if t := str(r.Params, "trie"); t != "" {
				label += " (" + t + ")"
			}
			if b := str(r.Params, "batch"); b != "" {
				label += " x" + b
			}
			row := rows.add(label)
			baselineRow[row] = fibBaselines[r.Impl]
			pts = append(pts, pt{row, probes.add(probe), r.NsOp})
			continue
		}
		// Updates and builds: one row each.
		label := r.Impl
		if op := str(r.Params, "op"); op != "" {
			label += " /" + str(r.Params, "prefix_len") + " " + op
		} else if r.Impl == "load" || r.Impl == "compiled-build" {
			label += " (per route)"
		}
		i := updRows.add(label)
		upd = append(upd, plotter.XY{X: r.NsOp, Y: float64(i)})
	}
	var ps []*plot.Plot
	if len(pts) > 0 {
		ss := make([]series, len(probes.keys))
		for pi, probe := range probes.keys {
			ss[pi].name = probe + " probes"
		}
		for _, q := range pts {
			ss[q.probe].xys = append(ss[q.probe].xys, plotter.XY{X: q.ns, Y: float64(q.row)})
		}
		labels := make([]string, len(rows.keys))
		for i, l := range rows.keys {
			labels[i] = l
			if baselineRow[i] {
				labels[i] += " (before)"
			}
		}
		p, err := dotPlot("FIB lookup per structure"+routes+" (seed 004)\n(before): the raw tries and the split local/main lookup",
			"ns per lookup", labels, ss)
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	if len(upd) > 0 {
		p, err := dotPlot("FIB load, build and update (median)", "ns per route / per update",
			updRows.keys, []series{{name: "ns", xys: upd}})
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// vethDesc names what the rows that are no forwarder measure.
var vethDesc = map[string]string{
	"generator": "generator (offered)",
	"ceiling":   "ceiling (XDP_DROP)",
}

func vethPlots(recs []bench.Record) ([]*plot.Plot, error) {
	var fwds, setups order
	mpps := map[[2]int]float64{}
	for _, r := range recs {
		if str(r.Params, "rate") != "max" || r.Mops <= 0 || strings.HasSuffix(r.Impl, "-soak") {
			continue
		}
		setup := str(r.Params, "setup")
		if setup == "" {
			setup = "unpinned"
		}
		mpps[[2]int{fwds.add(r.Impl), setups.add(setup)}] = r.Mops
	}
	if len(fwds.keys) == 0 {
		return nil, fmt.Errorf("no saturation records (params rate=max)")
	}
	labels := make([]string, len(fwds.keys))
	for i, f := range fwds.keys {
		labels[i] = f
		if d, ok := vethDesc[f]; ok {
			labels[i] = d
		}
	}
	linux, hasLinux := fwds.seen["linux"]
	if hasLinux {
		labels[linux] = "linux (baseline)"
	}
	rate, ratio := make([]series, len(setups.keys)), make([]series, len(setups.keys))
	for si, s := range setups.keys {
		rate[si].name, ratio[si].name = s, s
		base := mpps[[2]int{linux, si}]
		for fi := range fwds.keys {
			v, ok := mpps[[2]int{fi, si}]
			if !ok {
				continue
			}
			rate[si].xys = append(rate[si].xys, plotter.XY{X: float64(fi), Y: v})
			if hasLinux && base > 0 {
				ratio[si].xys = append(ratio[si].xys, plotter.XY{X: float64(fi), Y: v / base})
			}
		}
	}
	p := plot.New()
	p.Title.Text = "veth: 64-byte frames forwarded, per set-up (median of rounds)"
	p.Y.Label.Text = "Mpps"
	if err := barGroups(p, labels, rate); err != nil {
		return nil, err
	}
	slantX(p)
	ps := []*plot.Plot{p}
	if hasLinux {
		q := plot.New()
		q.Title.Text = "veth: against Linux ip_forward in the same run"
		q.Y.Label.Text = "x Linux"
		if err := barGroups(q, labels, ratio); err != nil {
			return nil, err
		}
		one := plotter.NewFunction(func(float64) float64 { return 1 })
		one.LineStyle.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		one.LineStyle.Color = plotutil.Color(6)
		q.Add(one)
		q.Legend.Add("Linux = 1", one)
		slantX(q)
		ps = append(ps, q)
	}
	return ps, nil
}

func mcastPlots(recs []bench.Record) ([]*plot.Plot, error) {
	var impls order
	var s series
	for _, r := range recs {
		if r.NsOp <= 0 {
			continue
		}
		i := impls.add(r.Impl)
		s.xys = append(s.xys, plotter.XY{X: float64(i), Y: r.NsOp})
	}
	labels := make([]string, len(impls.keys))
	for i, k := range impls.keys {
		labels[i] = k
		if k == "nofilter" {
			labels[i] = "nofilter (baseline)"
		}
	}
	s.name = "ns per frame"
	p := plot.New()
	p.Title.Text = "mcast: frames to a group nobody joined (seed 002)"
	p.Y.Label.Text = "ns per frame"
	if err := barGroups(p, labels, []series{s}); err != nil {
		return nil, err
	}
	return []*plot.Plot{p}, nil
}

func pipelinePlots(recs []bench.Record) ([]*plot.Plot, error) {
	var rows order
	var s series
	for _, r := range recs {
		if r.NsOp <= 0 {
			continue
		}
		label := r.Impl
		switch {
		case str(r.Params, "fib") != "":
			label += " (" + str(r.Params, "fib") + " FIB)"
		case str(r.Params, "members") != "":
			label += " (" + str(r.Params, "ports") + " ports, " + str(r.Params, "members") + " members)"
		case str(r.Params, "ports") != "":
			label += " (" + str(r.Params, "ports") + " ports)"
		}
		s.xys = append(s.xys, plotter.XY{X: r.NsOp, Y: float64(rows.add(label))})
	}
	s.name = "ns per packet"
	p, err := dotPlot("pipeline: 64-byte frames through l3.Engine", "ns per packet", rows.keys, []series{s})
	if err != nil {
		return nil, err
	}
	return []*plot.Plot{p}, nil
}

func genericPlots(suite string, recs []bench.Record) ([]*plot.Plot, error) {
	var rows order
	var s series
	for _, r := range recs {
		if r.NsOp <= 0 {
			continue
		}
		label := r.Impl
		if t := paramText(r.Params); t != "" {
			label += " " + t
		}
		s.xys = append(s.xys, plotter.XY{X: r.NsOp, Y: float64(rows.add(label))})
	}
	if len(s.xys) == 0 {
		return nil, nil
	}
	s.name = "ns/op"
	p, err := dotPlot(suite, "ns/op", rows.keys, []series{s})
	if err != nil {
		return nil, err
	}
	return []*plot.Plot{p}, nil
}

// implOrder lists the keys of m: the given ones first (those present),
// then the rest sorted.
func implOrder[V any](m map[string]V, first ...string) []string {
	var out []string
	for _, f := range first {
		if _, ok := m[f]; ok {
			out = append(out, f)
		}
	}
	var rest []string
	for k := range m {
		if !contains(first, k) {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	return append(out, rest...)
}

func sortedInts(m map[int]bool) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}

func sortedFloats[V any](m map[float64]V) []float64 {
	var out []float64
	for k := range m {
		out = append(out, k)
	}
	sort.Float64s(out)
	return out
}
