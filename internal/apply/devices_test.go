package apply

import (
	"strings"
	"testing"
)

// TestDeviceCheck: with a device check (the daemon's), every line that
// names a device that is neither a port, a bridge, a VLAN interface nor an
// existing device is refused with iproute2's words at its line, and the
// batch changes nothing; without one (offline) the names are virtual
// ports.
func TestDeviceCheck(t *testing.T) {
	c := newTestController()
	c.SetDeviceCheck(func(name string) bool { return name == "eth0" || name == "eth1" })
	if err := c.Apply(parseLines(t, "a.conf", []string{
		"link add br0 type bridge",
		"link set eth1 master br0",
		"link add link br0 name vlan10 type vlan id 10",
		"address add 10.0.10.1/24 dev vlan10",
		"address add 10.0.0.1/24 dev eth0",
	})); err != nil {
		t.Fatal(err)
	}
	before := c.Snapshot(nil)
	for _, line := range []string{
		"route add 10.8.0.0/16 dev eth9",
		"route del 10.8.0.0/16 dev eth9",
		"route add 10.8.0.0/16 nexthop via 10.0.0.2 dev eth0 nexthop via 10.0.0.3 dev eth9",
		"address add 10.7.0.1/24 dev eth9",
		"nexthop add id 7 via 10.0.0.2 dev eth9",
		"link set eth9 up",
		"link set eth9 master br0",
		"neigh add 10.0.0.9 lladdr 02:00:00:00:00:09 dev eth9",
		"bridge vlan add dev eth9 vid 10",
		"bridge fdb add 02:00:00:00:00:09 dev eth9 master",
		"bridge link set dev eth9 learning off",
	} {
		err := c.Apply(parseLines(t, "b.conf", []string{"route add 10.5.0.0/16 via 10.0.0.2", line}))
		if err == nil || err.Error() != `b.conf:2: Cannot find device "eth9"` {
			t.Errorf("%s: want `b.conf:2: Cannot find device \"eth9\"`, got %v", line, err)
		}
		if c.Engine().Domain().Port("eth9") != nil {
			t.Fatalf("%s: eth9 became a port", line)
		}
		if got := c.Snapshot(nil); got != before {
			t.Fatalf("%s: a refused batch changed the configuration", line)
		}
	}
	// The names that exist, bridges and VLAN interfaces pass.
	if err := c.Apply(parseLines(t, "c.conf", []string{
		"route add 10.9.0.0/16 dev eth0", "link set br0 up", "link set vlan10 up", "link set eth1 down",
	})); err != nil {
		t.Fatal(err)
	}
	// Offline: no check, every name is a virtual port.
	off := newTestController()
	if err := off.Apply(parseLines(t, "d.conf", []string{"route add 10.8.0.0/16 dev eth9"})); err != nil {
		t.Fatal(err)
	}
	if off.Engine().Domain().Port("eth9") == nil {
		t.Fatal("offline: eth9 is not a virtual port")
	}
}

// TestDeviceCheckFirstLine: the error names the first line that names the
// device.
func TestDeviceCheckFirstLine(t *testing.T) {
	c := newTestController()
	c.SetDeviceCheck(func(string) bool { return false })
	err := c.Apply(parseLines(t, "a.conf", []string{"address add 10.7.0.1/24 dev eth7", "route add 10.8.0.0/16 dev eth7"}))
	if err == nil || !strings.HasPrefix(err.Error(), `a.conf:1: Cannot find device "eth7"`) {
		t.Fatalf("got %v", err)
	}
}
