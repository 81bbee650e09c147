package metrics

// promtool check metrics on what /metrics serves with every optional source
// present (AF_XDP port counters, the control ring, FPM and the kernel
// mirror with lag observations): the lint the end-to-end test runs on a
// live daemon (cmd/netfwd TestDashboardPrometheus) sees only the I/O mode
// it runs with; this one sees every family the collector can export but
// the twins' (those need a host path: the end-to-end test has them).

import (
	"io"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/fpm"
	"github.com/netfwd/netfwd/internal/kmirror"
	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/internal/pktio/afxdp"
	"github.com/netfwd/netfwd/internal/testenv"
	"github.com/netfwd/netfwd/l2"
	"github.com/netfwd/netfwd/l3"
)

func TestPromtoolCheckMetrics(t *testing.T) {
	if !testenv.Have(t, "promtool") {
		t.Skip("promtool (Debian package prometheus) not installed")
	}
	e := l3.NewEngine(l3.EngineOptions{Clock: l2.NewManualClock()})
	x := afxdp.XDPStats{FillRingEmpty: 1, TxKicks: 2}
	ctl := pktio.Stats{}
	var f fpm.Stats
	var k kmirror.Stats
	f.C.Lag.Observe(5 * time.Millisecond)
	k.C.Lag.Observe(50 * time.Millisecond)
	src := Source{Engine: e, FPM: &f, Mirror: &k,
		Ports: func() []PortIO {
			return []PortIO{{Name: "p1", IO: "afxdp native", Stats: x.Stats, XDP: &x}, {Name: "p2", IO: "afpacket", Control: &ctl}}
		},
		XDPWaits: func() afxdp.WaitStats { return afxdp.WaitStats{Waits: 5, Blocked: 1} },
	}
	srv := httptest.NewServer(Handler(NewCollector(src)))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"netfwd_xdp_tx_kicks_total", "netfwd_pktio_control_ring_drops_total", "netfwd_route_source_lag_seconds_bucket", "netfwd_xdp_worker_waits_total"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	cmd := exec.Command("promtool", "check", "metrics")
	cmd.Stdin = strings.NewReader(string(body))
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
