package metrics

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/apply"
	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/l2"
	"github.com/netfwd/netfwd/l3"
)

func applyLines(t *testing.T, c *apply.Controller, text string) {
	t.Helper()
	cmds, errs := config.Parse("t.conf", strings.NewReader(text))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if err := c.Apply(cmds); err != nil {
		t.Fatal(err)
	}
}

func countsEqual(a, b map[uint32]map[fib.Type]int) bool {
	return maps.EqualFunc(a, b, func(x, y map[fib.Type]int) bool { return maps.Equal(x, y) })
}

// The cached counts follow every commit (random route changes against a
// fresh walk, the reference), and a scrape of an unchanged FIB does not
// walk it again.
func TestRouteCountCache(t *testing.T) {
	e := l3.NewEngine(l3.EngineOptions{Clock: l2.NewManualClock()})
	c := apply.New(e)
	applyLines(t, c, "address add 192.0.2.1/24 dev eth0\n")
	col := NewCollector(Source{Engine: e, Controller: c})
	srv := httptest.NewServer(Handler(col))
	defer srv.Close()
	get := func() {
		t.Helper()
		resp, err := srv.Client().Get(srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	cached := func() map[uint32]map[fib.Type]int {
		col.routeCounts.mu.Lock()
		defer col.routeCounts.mu.Unlock()
		return col.routeCounts.counts
	}
	rng := rand.New(rand.NewPCG(1, 2))
	present := map[string]bool{}
	for i := range 300 {
		p := fmt.Sprintf("10.%d.%d.0/24", rng.IntN(4), rng.IntN(8))
		kind := []string{"", "blackhole ", "unreachable "}[rng.IntN(3)]
		switch {
		case present[p]:
			applyLines(t, c, "route del "+p+"\n")
			delete(present, p)
		case kind == "":
			applyLines(t, c, "route add "+p+" via 192.0.2.9\n")
			present[p] = true
		default:
			applyLines(t, c, "route add "+kind+p+"\n")
			present[p] = true
		}
		get()
		if got, want := cached(), e.FIB().RouteCounts(); !countsEqual(got, want) {
			t.Fatalf("step %d: cached counts %v, a walk counts %v", i, got, want)
		}
		if i%10 == 0 { // no commit since: the same stored counts, no walk
			before := reflect.ValueOf(cached()).UnsafePointer()
			get()
			if reflect.ValueOf(cached()).UnsafePointer() != before {
				t.Fatalf("step %d: a scrape of an unchanged FIB counted its routes again", i)
			}
		}
	}
}
