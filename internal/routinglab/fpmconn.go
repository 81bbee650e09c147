package routinglab

// The FPM connection from zebra to netfwd, seen by the kernel: when the
// last byte zebra sent arrived (tcp_info's last_data_recv, which `ss -i`
// prints as lastrcv, in milliseconds). One query after a stream went quiet
// dates its last message without polling anybody while it flows.
//
// Locking: none (one command per query).

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

var lastrcvRE = regexp.MustCompile(`\blastrcv:(\d+)`)

// FPMLastReceive returns when netfwd's end of the FPM connection (local
// port of FPMAddr in the router namespace) last received data.
func (l *Lab) FPMLastReceive() (time.Time, error) {
	_, port, _ := strings.Cut(FPMAddr, ":")
	before := time.Now()
	out, err := l.Exec(l.Rtr, "ss", "-tinH", "state", "established", "( sport = :"+port+" )")
	if err != nil {
		return time.Time{}, err
	}
	m := lastrcvRE.FindAllStringSubmatch(out, -1)
	if len(m) != 1 {
		return time.Time{}, fmt.Errorf("routinglab: want one FPM connection with lastrcv in ss's output, got %d: %s", len(m), out)
	}
	ms, _ := strconv.Atoi(m[0][1])
	// ss read the socket between before and now: take the middle.
	mid := before.Add(time.Since(before) / 2)
	return mid.Add(-time.Duration(ms) * time.Millisecond), nil
}
