package apply

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/config"
)

// The compact diff against its reference model (diff_reference_test.go),
// and the file path (DiffFiles, PortNamer) against the command path.

// randomPair makes the pair TestDiffRandomPairs makes for a seed (nil when
// the generator could not).
func randomPair(t testing.TB, seed int) (a, b []string) {
	r := rand.New(rand.NewPCG(uint64(seed), 7))
	a = genConfig(t, r, 10+r.IntN(30))
	if r.IntN(5) == 0 {
		b = genConfig(t, r, 10+r.IntN(30))
	} else {
		b = mutate(t, r, a)
	}
	return a, b
}

func diffSeeds() int {
	n := 400
	if testing.Short() {
		n = 60
	}
	if v, err := strconv.Atoi(os.Getenv("NETFWD_DIFF_SEEDS")); err == nil {
		n = v
	}
	return n
}

func renderSteps(steps []Step) string {
	var s []string
	for _, st := range steps {
		s = append(s, fmt.Sprintf("%v lenient=%v %s", st.Pos, st.Lenient, describe(st.Command)))
	}
	return strings.Join(s, "\n")
}

// The compact diff gives exactly the reference's steps and statistics, for
// the diff and for the full redo.
func TestDiffMatchesReference(t *testing.T) {
	n, compared, redone := diffSeeds(), 0, 0
	for seed := range n {
		a, b := randomPair(t, seed)
		if a == nil || b == nil {
			continue
		}
		ac, bc := parseLines(t, "a.conf", a), parseLines(t, "b.conf", b)
		got, gotSt := Diff(ac, bc, DiffOptions{})
		want, wantSt := refDiff(ac, bc, DiffOptions{}, false)
		if !reflect.DeepEqual(got, want) || gotSt != wantSt {
			t.Fatalf("seed %d: diff differs from the reference\nA:\n%s\nB:\n%s\ngot %+v:\n%s\nwant %+v:\n%s", seed,
				strings.Join(a, "\n"), strings.Join(b, "\n"), gotSt, renderSteps(got), wantSt, renderSteps(want))
		}
		full, _ := refDiff(ac, bc, DiffOptions{}, true)
		if got := FullRedo(ac, bc, DiffOptions{}); !reflect.DeepEqual(got, full) {
			t.Fatalf("seed %d: full redo differs from the reference\ngot:\n%s\nwant:\n%s", seed, renderSteps(got), renderSteps(full))
		}
		compared++
		redone += gotSt.Redone
	}
	if compared < n*8/10 || redone == 0 {
		t.Fatalf("%d of %d seeds compared, %d commands re-done: the generator does not test enough", compared, n, redone)
	}
}

// fileText writes lines as a config file would have them: with comments,
// blank lines and CRLF line ends here and there, so that line numbers and
// command indexes differ.
func fileText(r *rand.Rand, lines []string) string {
	var b strings.Builder
	for _, l := range lines {
		switch r.IntN(8) {
		case 0:
			b.WriteString("# a comment\n")
		case 1:
			b.WriteString("\n")
		case 2:
			b.WriteString("   \r\n")
		}
		b.WriteString(l)
		if r.IntN(4) == 0 {
			b.WriteString("  # why\r")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// DiffFiles reads the texts to the same steps Diff computes from the
// parsed commands, and names the ports a fresh engine declares.
func TestDiffFilesMatchesDiff(t *testing.T) {
	n := diffSeeds()
	for seed := range n {
		a, b := randomPair(t, seed)
		if a == nil || b == nil {
			continue
		}
		r := rand.New(rand.NewPCG(uint64(seed), 11))
		fa := &File{Name: "a.conf", Text: []byte(fileText(r, a))}
		fb := &File{Name: "b.conf", Text: []byte(fileText(r, b))}
		ac, errs := fa.Commands()
		if errs != nil {
			t.Fatal(errs)
		}
		bc, errs := fb.Commands()
		if errs != nil {
			t.Fatal(errs)
		}
		want, wantSt := Diff(ac, bc, DiffOptions{})
		fd := DiffFiles(fa, fb, DiffOptions{})
		if !reflect.DeepEqual(fd.Steps, want) || fd.Stats != wantSt || fd.Errs != nil {
			t.Fatalf("seed %d: DiffFiles differs from Diff (errors %v)\nA:\n%s\nB:\n%s\ngot:\n%s\nwant:\n%s", seed, fd.Errs,
				fa.Text, fb.Text, renderSteps(fd.Steps), renderSteps(want))
		}
		var ports []string
		for _, p := range applyFresh(t, "b.conf", b).Engine().Domain().Ports() {
			ports = append(ports, p.Name)
		}
		if !reflect.DeepEqual(fd.Ports, ports) {
			t.Fatalf("seed %d: ports %v, a fresh engine declares %v\n%s", seed, fd.Ports, ports, fb.Text)
		}
	}
}

// A file with bad lines: they are reported with their lines, and the
// steps take old to the lines that parse.
func TestDiffFilesErrors(t *testing.T) {
	old := &File{Name: "a.conf", Text: []byte("address add 192.0.2.1/24 dev eth0\nroute add 10.0.0.0/8 via 192.0.2.9\n")}
	bad := &File{Name: "b.conf", Text: []byte("address add 192.0.2.1/24 dev eth0\nroute add 10.0.0.0/33 via 192.0.2.9\n" +
		"route add 10.1.0.0/16 via 192.0.2.9\nfrobnicate\n")}
	fd := DiffFiles(old, bad, DiffOptions{})
	if len(fd.Errs) != 2 || !strings.HasPrefix(fd.Errs[0].Error(), "b.conf:2: ") || !strings.HasPrefix(fd.Errs[1].Error(), "b.conf:4: ") {
		t.Fatalf("errors %v", fd.Errs)
	}
	got := renderSteps(fd.Steps)
	want := "a.conf:2 lenient=true route delete {Prefix:10.0.0.0/8 Table:0 Owner:config Type:unicast TypeSet:true Proto:boot Scope:global ScopeSet:false Metric:0 MetricSet:false Src:invalid IP NhID:0 Gateway:192.0.2.9 Dev: OnLink:false Multipath:[]}\n" +
		"b.conf:3 lenient=false route add {Prefix:10.1.0.0/16 Table:0 Owner:config Type:unicast TypeSet:false Proto:unspec Scope:global ScopeSet:false Metric:0 MetricSet:false Src:invalid IP NhID:0 Gateway:192.0.2.9 Dev: OnLink:false Multipath:[]}"
	if got != want {
		t.Fatalf("steps:\n%s\nwant:\n%s", got, want)
	}
	if !reflect.DeepEqual(fd.Ports, []string{"eth0"}) {
		t.Fatalf("ports %v", fd.Ports)
	}
}

// routeSum encodes every field of a route line: a spec that differs in any
// one field has another sum. RouteSpec and Path growing a field fails here
// until routeSum encodes it.
func TestRouteSumCoversSpec(t *testing.T) {
	if n := reflect.TypeFor[fib.RouteSpec]().NumField(); n != 16 {
		t.Fatalf("fib.RouteSpec has %d fields, routeSum encodes 16: add the new ones to it and here", n)
	}
	if n := reflect.TypeFor[fib.Path]().NumField(); n != 4 {
		t.Fatalf("fib.Path has %d fields, routeSum encodes 4: add the new ones to it and here", n)
	}
	gw, a2 := netip.MustParseAddr("192.0.2.9"), netip.MustParseAddr("192.0.2.10")
	base := config.RouteCmd{Op: "add", Spec: fib.RouteSpec{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Gateway: gw,
		Multipath: []fib.Path{{Gateway: gw, Dev: "eth0", Weight: 1}}}}
	variants := map[string]func(*config.RouteCmd){
		"op":        func(r *config.RouteCmd) { r.Op = "append" },
		"prefix":    func(r *config.RouteCmd) { r.Spec.Prefix = netip.MustParsePrefix("10.0.0.0/9") },
		"table":     func(r *config.RouteCmd) { r.Spec.Table = 100 },
		"owner":     func(r *config.RouteCmd) { r.Spec.Owner = fib.OwnerFPM },
		"type":      func(r *config.RouteCmd) { r.Spec.Type = fib.Blackhole },
		"typeset":   func(r *config.RouteCmd) { r.Spec.TypeSet = true },
		"proto":     func(r *config.RouteCmd) { r.Spec.Proto = fib.ProtoBoot },
		"scope":     func(r *config.RouteCmd) { r.Spec.Scope = fib.ScopeLink },
		"scopeset":  func(r *config.RouteCmd) { r.Spec.ScopeSet = true },
		"metric":    func(r *config.RouteCmd) { r.Spec.Metric = 1 },
		"metricset": func(r *config.RouteCmd) { r.Spec.MetricSet = true },
		"src":       func(r *config.RouteCmd) { r.Spec.Src = gw },
		"nhid":      func(r *config.RouteCmd) { r.Spec.NhID = 1 },
		"gateway":   func(r *config.RouteCmd) { r.Spec.Gateway = a2 },
		"nogateway": func(r *config.RouteCmd) { r.Spec.Gateway = netip.Addr{} },
		"dev":       func(r *config.RouteCmd) { r.Spec.Dev = "eth0" },
		"onlink":    func(r *config.RouteCmd) { r.Spec.OnLink = true },
		"paths":     func(r *config.RouteCmd) { r.Spec.Multipath = append(r.Spec.Multipath, r.Spec.Multipath[0]) },
		"nopaths":   func(r *config.RouteCmd) { r.Spec.Multipath = nil },
		"pathgw":    func(r *config.RouteCmd) { r.Spec.Multipath[0].Gateway = a2 },
		"pathdev":   func(r *config.RouteCmd) { r.Spec.Multipath[0].Dev = "eth1" },
		"pathonlnk": func(r *config.RouteCmd) { r.Spec.Multipath[0].OnLink = true },
		"weight":    func(r *config.RouteCmd) { r.Spec.Multipath[0].Weight = 2 },
	}
	n := newNormaliser()
	seen := map[[2]uint64]string{n.routeSum(&base): "base"}
	for name, f := range variants {
		r := base
		r.Spec.Multipath = append([]fib.Path(nil), base.Spec.Multipath...)
		f(&r)
		s := n.routeSum(&r)
		if prev, ok := seen[s]; ok {
			t.Errorf("%s has the sum of %s", name, prev)
		}
		seen[s] = name
	}
	same := base
	same.Spec.Multipath = append([]fib.Path(nil), base.Spec.Multipath...)
	if n.routeSum(&same) != n.routeSum(&base) {
		t.Error("equal routes have different sums")
	}
}
