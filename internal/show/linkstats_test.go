package show

import (
	"bufio"
	"strings"
	"testing"

	"github.com/netfwd/netfwd/l2"
)

// The counters block is byte for byte what iproute2 6.1 prints for the
// same numbers (`ip -s link show lo` with 3193 bytes, 29 packets), and its
// columns widen with the numbers as ip's do.
func TestStats64Text(t *testing.T) {
	var b strings.Builder
	bw := bufio.NewWriter(&b)
	statsOf(l2.PortStats{RxBytes: 3193, RxPackets: 29, TxBytes: 3193, TxPackets: 29}).writeText(bw)
	bw.Flush()
	want := "    RX:  bytes packets errors dropped  missed   mcast           \n" +
		"          3193      29      0       0       0       0 \n" +
		"    TX:  bytes packets errors dropped carrier collsns           \n" +
		"          3193      29      0       0       0       0 \n"
	if b.String() != want {
		t.Errorf("got\n%q\nwant\n%q", b.String(), want)
	}
	b.Reset()
	statsOf(l2.PortStats{RxBytes: 126570234447969, RxPackets: 15016149200}).writeText(bw)
	bw.Flush()
	want = "    RX:       bytes     packets errors dropped  missed   mcast           \n" +
		"    126570234447969 15016149200      0       0       0       0 \n"
	if !strings.HasPrefix(b.String(), want) {
		t.Errorf("got\n%q\nwant prefix\n%q", b.String(), want)
	}
}
