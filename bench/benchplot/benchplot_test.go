package benchplot

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/netfwd/netfwd/bench"
)

// Small fixed records of each suite, in the JSON of `netfwd-bench --json`.
const (
	floodJSON = `[
{"suite":"flood","impl":"naive","params":{"members":2,"ports":8,"vids":1},"ns_op":76,"mops":13,"allocs_op":0,"env":{"cpu":"Test CPU","goamd64":"v1","go":"go1.26.8","cpus":2}},
{"suite":"flood","impl":"bridge","params":{"members":2,"ports":8,"vids":1},"ns_op":41,"mops":24,"allocs_op":0},
{"suite":"flood","impl":"naive","params":{"members":2,"ports":64,"vids":1},"ns_op":544,"mops":1.8,"allocs_op":0},
{"suite":"flood","impl":"bridge","params":{"members":2,"ports":64,"vids":1},"ns_op":40,"mops":25,"allocs_op":0},
{"suite":"flood","impl":"naive","params":{"members":64,"ports":64,"vids":1024},"ns_op":1330,"mops":0.75,"allocs_op":0},
{"suite":"flood","impl":"bridge","params":{"members":64,"ports":64,"vids":1024},"ns_op":768,"mops":1.3,"allocs_op":0}]`
	fdbJSON = `[
{"suite":"fdb","impl":"hash256","params":{"entries":1000,"op":"lookup"},"ns_op":25,"mops":40,"allocs_op":0},
{"suite":"fdb","impl":"fdb","params":{"entries":1000,"op":"lookup"},"ns_op":33,"mops":30,"allocs_op":0,"extra":{"lookup_uniform_ns":35}},
{"suite":"fdb","impl":"hash256","params":{"entries":1000000,"op":"lookup"},"ns_op":354746,"mops":0.003,"allocs_op":0},
{"suite":"fdb","impl":"fdb","params":{"entries":1000000,"op":"lookup"},"ns_op":57,"mops":17,"allocs_op":0,"extra":{"lookup_uniform_ns":140}},
{"suite":"fdb","impl":"hash256","params":{"entries":1000,"op":"learn"},"ns_op":200,"mops":5,"allocs_op":0},
{"suite":"fdb","impl":"fdb","params":{"entries":1000000,"op":"learn"},"ns_op":677,"mops":1.5,"allocs_op":0}]`
	fibJSON = `[
{"suite":"fib","impl":"load","params":{"routes":1000,"trie":"fast"},"ns_op":2700,"mops":0.37,"allocs_op":0},
{"suite":"fib","impl":"bart-fast-raw","params":{"probe":"hot","routes":1000},"ns_op":11,"mops":91,"allocs_op":0},
{"suite":"fib","impl":"bart-fast-raw","params":{"probe":"random","routes":1000},"ns_op":154,"mops":6.5,"allocs_op":0},
{"suite":"fib","impl":"merged","params":{"probe":"random","routes":1000,"trie":"fast"},"ns_op":157,"mops":6.3,"allocs_op":0},
{"suite":"fib","impl":"compiled-batch","params":{"batch":256,"probe":"random","routes":1000},"ns_op":7.8,"mops":127,"allocs_op":0},
{"suite":"fib","impl":"rules","params":{"probe":"random","routes":1000,"rules":100,"trie":"compiled"},"ns_op":250,"mops":4,"allocs_op":0,"extra":{"vs_merged":9.5}},
{"suite":"fib","impl":"rules","params":{"probe":"random","routes":1000,"rules":10,"trie":"fast"},"ns_op":80,"mops":12.5,"allocs_op":0,"extra":{"vs_merged":2.5}},
{"suite":"fib","impl":"fib-update","params":{"op":"add","prefix_len":24,"routes":1000},"ns_op":7700,"mops":0.13,"allocs_op":0}]`
	vethJSON = `[
{"suite":"veth","impl":"linux","params":{"frame":64,"rate":"max","setup":"unpinned"},"ns_op":2207,"mops":0.453,"allocs_op":0},
{"suite":"veth","impl":"netfwd-afxdp","params":{"frame":64,"rate":"max","setup":"unpinned"},"ns_op":3184,"mops":0.314,"allocs_op":0},
{"suite":"veth","impl":"linux","params":{"frame":64,"rate":"max","setup":"onecore"},"ns_op":3802,"mops":0.263,"allocs_op":0},
{"suite":"veth","impl":"netfwd-afxdp","params":{"frame":64,"rate":"max","setup":"onecore"},"ns_op":3571,"mops":0.280,"allocs_op":0},
{"suite":"veth","impl":"netfwd-afxdp","params":{"frame":64,"rate":"50pct","pps":150000,"setup":"unpinned"},"ns_op":6666,"mops":0.15,"allocs_op":0},
{"suite":"veth","impl":"netfwd-afxdp-soak","params":{"frame":64,"rate":"50pct","duration":"15s"},"ns_op":6666,"mops":0.15,"allocs_op":0}]`
	mcastJSON = `[
{"suite":"mcast","impl":"nofilter","params":{"frames":1048576,"ports":8},"ns_op":246,"mops":4,"allocs_op":0},
{"suite":"mcast","impl":"filter","params":{"frames":1048576,"ports":8},"ns_op":31.9,"mops":31,"allocs_op":0}]`
	pipelineJSON = `[
{"suite":"pipeline","impl":"routed","params":{"fib":"compiled","frame":64,"probe":"random","routes":1000},"ns_op":65.7,"mops":15.2,"allocs_op":0},
{"suite":"pipeline","impl":"bridged-flood","params":{"frame":64,"members":2,"ports":64},"ns_op":46.5,"mops":21.5,"allocs_op":0}]`
	ndrJSON = `[
{"suite":"ndr","impl":"linux","params":{"point":"curve","offered_pct":50},"ns_op":2000,"mops":0.5,"allocs_op":0,"extra":{"loss_pct":0}},
{"suite":"ndr","impl":"linux","params":{"point":"curve","offered_pct":100},"ns_op":1000,"mops":1,"allocs_op":0,"extra":{"loss_pct":0}},
{"suite":"ndr","impl":"linux","params":{"point":"ndr"},"ns_op":1000,"mops":1,"allocs_op":0},
{"suite":"ndr","impl":"netfwd-afpacket","params":{"point":"curve","offered_pct":50},"ns_op":2000,"mops":0.5,"allocs_op":0,"extra":{"loss_pct":0}},
{"suite":"ndr","impl":"netfwd-afpacket","params":{"point":"curve","offered_pct":100},"ns_op":1000,"mops":1,"allocs_op":0,"extra":{"loss_pct":3.5}},
{"suite":"ndr","impl":"netfwd-afpacket","params":{"point":"bursts","burst_frames":1500},"ns_op":0,"mops":0.01,"allocs_op":0},
{"suite":"ndr","impl":"netfwd-afpacket","params":{"point":"ndr"},"ns_op":1400,"mops":0.7,"allocs_op":0}]`
	routesJSON = `[{"suite":"routes","impl":"config-load","params":{"routes":1000},"ns_op":2500,"mops":0.4,"allocs_op":0}]`
)

func mustRecords(t *testing.T, js string) []bench.Record {
	t.Helper()
	recs, err := ReadRecords(strings.NewReader(js))
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// svgTexts parses an SVG document as XML and returns the text of its
// <text> elements; it fails the test if the root is not <svg> or the XML
// is not well formed.
func svgTexts(t *testing.T, b []byte) []string {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(b))
	var texts []string
	var inText, sawRoot bool
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		switch tk := tok.(type) {
		case xml.StartElement:
			if !sawRoot {
				if tk.Name.Local != "svg" {
					t.Fatalf("root element %q, want svg", tk.Name.Local)
				}
				sawRoot = true
			}
			if tk.Name.Local == "text" {
				inText = true
				texts = append(texts, "")
			}
		case xml.EndElement:
			if tk.Name.Local == "text" {
				inText = false
			}
		case xml.CharData:
			if inText {
				texts[len(texts)-1] += string(tk)
			}
		}
	}
	if !sawRoot {
		t.Fatal("no <svg> element")
	}
	return texts
}

func TestSuiteSVGs(t *testing.T) {
	for _, tc := range []struct {
		suite, js string
		want      []string
		absent    []string
	}{
		{"flood", floodJSON,
			[]string{"naive (baseline)", "bridge", "ports / VLAN members", "ns per flooded frame", "8/2", "64/2", "64/64",
				"flood: 1 VLAN(s) per port", "flood: 1024 VLAN(s) per port", "Test CPU, 2 CPUs, GOAMD64=v1, go1.26.8"},
			[]string{"flood: 64 VLAN(s) per port"}},
		{"fdb", fdbJSON,
			[]string{"hash256 (baseline)", "fdb", "fdb, uniform probes", "entries", "1K", "1M", "ns per lookup", "ns per learn"},
			[]string{"hash256, uniform probes (baseline)", "30K"}},
		{"fib", fibJSON,
			[]string{"bart-fast-raw (before)", "merged (fast)", "FIB lookup per structure, 1000 routes (seed 004)", "compiled-batch x256", "hot probes", "random probes",
				"ns per lookup", "load (per route)", "fib-update /24 add", "rules 100 (compiled)", "rules 10 (fast)"},
			[]string{"split (fast) (before)"}},
		{"veth", vethJSON,
			[]string{"linux (baseline)", "netfwd-afxdp", "unpinned", "onecore", "Mpps", "x Linux", "Linux = 1"},
			[]string{"netfwd-afxdp-soak"}},
		{"ndr", ndrJSON, []string{"linux (baseline)", "netfwd-afpacket", "lost, %", "offered, % of the generator's ceiling", "kpps"}, nil},
		{"mcast", mcastJSON, []string{"nofilter (baseline)", "filter", "ns per frame"}, nil},
		{"pipeline", pipelineJSON, []string{"routed (compiled FIB)", "bridged-flood (64 ports, 2 members)", "ns per packet"}, nil},
		{"routes", routesJSON, []string{"routes", "config-load routes=1000", "ns/op"}, nil},
	} {
		t.Run(tc.suite, func(t *testing.T) {
			b, err := SVG(tc.suite, mustRecords(t, tc.js))
			if err != nil {
				t.Fatal(err)
			}
			texts := svgTexts(t, b)
			joined := strings.Join(texts, "\n")
			for _, w := range tc.want {
				if !slices.Contains(texts, w) && !strings.Contains(joined, w) {
					t.Errorf("no text %q in the SVG; have %q", w, texts)
				}
			}
			for _, a := range tc.absent {
				if slices.Contains(texts, a) {
					t.Errorf("text %q drawn, but the records have no such case", a)
				}
			}
		})
	}
}

// A suite's baseline is drawn only when its records are there.
func TestBaselineOnlyWhenMeasured(t *testing.T) {
	var recs []bench.Record
	for _, r := range mustRecords(t, floodJSON) {
		if r.Impl == "bridge" {
			recs = append(recs, r)
		}
	}
	b, err := SVG("flood", recs)
	if err != nil {
		t.Fatal(err)
	}
	texts := svgTexts(t, b)
	if slices.Contains(texts, "naive (baseline)") || !slices.Contains(texts, "bridge") {
		t.Errorf("legend %q, want bridge alone", texts)
	}
}

func TestNothingToDraw(t *testing.T) {
	if _, err := SVG("flood", mustRecords(t, fdbJSON)); err == nil {
		t.Error("flood drawn from fdb records")
	}
	noParams := `[{"suite":"flood","impl":"bridge","params":{},"ns_op":41,"mops":24,"allocs_op":0}]`
	if _, err := SVG("flood", mustRecords(t, noParams)); err == nil {
		t.Error("flood drawn from records without vids/ports/members")
	}
	noSat := `[{"suite":"veth","impl":"linux","params":{"rate":"50pct"},"ns_op":41,"mops":0.2,"allocs_op":0}]`
	if _, err := SVG("veth", mustRecords(t, noSat)); err == nil {
		t.Error("veth drawn without saturation records")
	}
}

// Saved output may hold several runs appended: arrays and single records.
func TestReadRecordsConcatenated(t *testing.T) {
	in := floodJSON + "\n" + mcastJSON + "\n" +
		`{"suite":"fdb","impl":"fdb","params":{"entries":1000,"op":"lookup"},"ns_op":33,"mops":30,"allocs_op":0}`
	recs, err := ReadRecords(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	by := BySuite(recs)
	if len(recs) != 9 || len(by["flood"]) != 6 || len(by["mcast"]) != 2 || len(by["fdb"]) != 1 {
		t.Errorf("read %d records: flood %d mcast %d fdb %d", len(recs), len(by["flood"]), len(by["mcast"]), len(by["fdb"]))
	}
	if by["flood"][0].Env == nil || by["flood"][0].Env.CPU != "Test CPU" {
		t.Errorf("env not read: %+v", by["flood"][0].Env)
	}
	if _, err := ReadRecords(strings.NewReader(`[{"suite":`)); err == nil {
		t.Error("truncated JSON read without error")
	}
}

func TestWriteDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "plots")
	recs := append(mustRecords(t, floodJSON), mustRecords(t, vethJSON)...)
	files, err := WriteDir(dir, "", recs)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "flood.svg"), filepath.Join(dir, "veth.svg")}
	if !slices.Equal(files, want) {
		t.Errorf("wrote %v, want %v", files, want)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		svgTexts(t, b)
	}
	if _, err := WriteDir(dir, "both", recs); err == nil {
		t.Error("one file name accepted for two suites")
	}
	files, err = WriteDir(dir, "veth-old", mustRecords(t, vethJSON))
	if err != nil || len(files) != 1 || filepath.Base(files[0]) != "veth-old.svg" {
		t.Errorf("--name: %v %v", files, err)
	}
	if _, err := WriteDir(dir, "../x", mustRecords(t, vethJSON)); err == nil {
		t.Error("a name with a slash accepted")
	}
	if _, err := WriteDir(dir, "", nil); err == nil {
		t.Error("no records accepted")
	}
}

func TestLogTicks(t *testing.T) {
	var labels []string
	for _, tk := range (logTicks{}).Ticks(30, 2000) {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	if want := []string{"50", "100", "200", "500", "1000", "2000"}; !slices.Equal(labels, want) {
		t.Errorf("labels 30..2000: %v, want %v", labels, want)
	}
	labels = labels[:0]
	for _, tk := range (logTicks{}).Ticks(5, 400000) {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	if want := []string{"10", "100", "1000", "10000", "100000"}; !slices.Equal(labels, want) {
		t.Errorf("labels 5..400000: %v, want %v", labels, want)
	}
	if ts := (logTicks{}).Ticks(0, 10); ts != nil {
		t.Errorf("ticks for a range from 0: %v", ts)
	}
}

func TestHumanCount(t *testing.T) {
	for n, want := range map[float64]string{1000: "1K", 30000: "30K", 1e6: "1M", 100000: "100K", 1500: "1.5K", 999: "999"} {
		if got := humanCount(n); got != want {
			t.Errorf("humanCount(%v) = %q, want %q", n, got, want)
		}
	}
}
