package daemon

import (
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"testing"

	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/internal/kmirror"
)

// The kernel mirror's neighbour command is built directly; it must be the
// command (or the refusal) that the `neigh` line of the same update parses
// to, the way it was made before: text formatted and parsed back.
func TestMirrorNeighCmdMatchesLine(t *testing.T) {
	mac := [6]byte{0x02, 0, 0, 0, 0xab, 0x01}
	var ups []kmirror.NeighUpdate
	for _, ip := range []string{"10.0.0.2", "192.0.2.255", "0.1.2.3", "224.0.0.22", "239.255.255.250", "255.255.255.255", "::1"} {
		for _, dev := range []string{"eth0", "br0.10", "a/b", "sixteen-chars-xx"} {
			for _, st := range []string{"permanent", "reachable", "stale", "noarp", "delay", "failed"} {
				for _, m := range [][6]byte{mac, {}} {
					ups = append(ups, kmirror.NeighUpdate{Dev: dev, IP: netip.MustParseAddr(ip), MAC: m, State: st})
				}
			}
			ups = append(ups, kmirror.NeighUpdate{Dev: dev, IP: netip.MustParseAddr(ip), Delete: true})
		}
	}
	accepted := 0
	for _, u := range ups {
		// The line mirrorNeigh used to format.
		line := fmt.Sprintf("neigh del %s dev %s", u.IP, u.Dev)
		if !u.Delete {
			line = fmt.Sprintf("neigh replace %s lladdr %s dev %s nud %s", u.IP, net.HardwareAddr(u.MAC[:]), u.Dev, u.State)
		}
		want, ok, werr := config.ParseLine(config.Pos{File: "kernel-mirror"}, line)
		got, gerr := mirrorNeighCmd(u)
		if (werr != nil || !ok) != (gerr != nil) {
			t.Errorf("%+v: the line %q gives %v (ok %v), the built command %v", u, line, werr, ok, gerr)
			continue
		}
		if gerr != nil {
			continue
		}
		accepted++
		if got.Pos != want.Pos || got.Neigh == nil || !reflect.DeepEqual(*got.Neigh, *want.Neigh) {
			t.Errorf("%q: built %+v at %v, parsed %+v at %v", line, got.Neigh, got.Pos, want.Neigh, want.Pos)
		}
		if got.Route != nil || got.Addr != nil || got.Nexthop != nil || got.Link != nil || got.Bridge != nil || got.Query != nil {
			t.Errorf("%q: built a command with more than a neighbour: %+v", line, got)
		}
	}
	if accepted == 0 || accepted == len(ups) {
		t.Fatalf("%d of %d updates accepted: the cases test nothing", accepted, len(ups))
	}
	// Empty words, which the kernel does not send, are where the text
	// form went wrong ("dev  nud " parsed as device "nud"); refused.
	for _, u := range []kmirror.NeighUpdate{
		{Dev: "", IP: netip.MustParseAddr("10.0.0.2"), MAC: mac, State: "reachable"},
		{Dev: "eth0", IP: netip.MustParseAddr("10.0.0.2"), MAC: mac, State: ""},
		{Dev: "", IP: netip.MustParseAddr("10.0.0.2"), Delete: true},
	} {
		if c, err := mirrorNeighCmd(u); err == nil {
			t.Errorf("%+v: built %q", u, c.Text)
		}
	}
}
