package lab

import (
	"strings"
	"testing"
)

func TestParseMetrics(t *testing.T) {
	text := `# HELP netfwd_drops_total Dropped packets.
# TYPE netfwd_drops_total counter
netfwd_drops_total{layer="l3",reason="ip_checksum"} 7
netfwd_drops_total{layer="l3",reason="ttl_expired"} 2
netfwd_drops_total{layer="l2",reason="malformed"} 1e+01
netfwd_port_rx_packets_total{port="eth1"} 42 1700000000000
weird{a="x\"y",b="z"} -1.5
plain 3
`
	m, err := ParseMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Samples) != 6 {
		t.Fatalf("%d samples, want 6: %+v", len(m.Samples), m.Samples)
	}
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"netfwd_drops_total", nil, 19},
		{"netfwd_drops_total", []string{"layer", "l3"}, 9},
		{"netfwd_drops_total", []string{"reason", "ip_checksum"}, 7},
		{"netfwd_drops_total", []string{"reason", "nope"}, 0},
		{"netfwd_port_rx_packets_total", []string{"port", "eth1"}, 42},
		{"weird", []string{"a", `x"y`}, -1.5},
		{"plain", nil, 3},
	} {
		if got := m.Sum(c.name, c.labels...); got != c.want {
			t.Errorf("Sum(%s, %v) = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if k := m.Samples[0].Key(); k != `netfwd_drops_total{layer="l3",reason="ip_checksum"}` {
		t.Errorf("Key = %s", k)
	}
	for _, bad := range []string{"x{a=1} 2", `x{a="1" 2`, "x", "x{} y"} {
		if _, err := ParseMetrics(strings.NewReader(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
