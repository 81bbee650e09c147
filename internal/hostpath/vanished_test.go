package hostpath

import (
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/testenv"
)

// TestVanished: a twin deleted behind the Manager's back is reported (and
// nothing else is); the next Sync re-creates it and the report is empty.
func TestVanished(t *testing.T) {
	tm := newTestManager(t, Options{})
	tm.sync(t, Spec{Port: "eth1", MAC: testMAC}, Spec{Port: "eth2", MAC: peerMAC})
	if v := tm.Vanished(); len(v) != 0 {
		t.Fatalf("Vanished before any deletion: %+v", v)
	}
	testenv.Run(t, "ip", "-n", tm.ns, "link", "del", "nf-eth1")
	var v []VanishedTwin
	deadline := time.Now().Add(2 * time.Second)
	for len(v) == 0 && time.Now().Before(deadline) {
		v = tm.Vanished()
		time.Sleep(10 * time.Millisecond)
	}
	if len(v) != 1 || v[0].Port != "eth1" || v[0].Name != "nf-eth1" || v[0].Reason == "" {
		t.Fatalf("Vanished after deleting nf-eth1: %+v", v)
	}
	tm.sync(t, Spec{Port: "eth1", MAC: testMAC}, Spec{Port: "eth2", MAC: peerMAC})
	checkTwin(t, tm.ns, "nf-eth1", testMAC, 1500)
	if v := tm.Vanished(); len(v) != 0 {
		t.Fatalf("Vanished after the re-creating Sync: %+v", v)
	}
}
