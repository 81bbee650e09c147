package daemon

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netfwd/netfwd/internal/hostpath"
	"github.com/netfwd/netfwd/internal/testenv"
	"github.com/netfwd/netfwd/wire"
)

// TestTwinWatchBackstop: without any link event, the reconcile loop's
// periodic check finds a twin deleted behind its back (and says why at
// WARN), and a requestSync (SIGHUP's reload) forces a Sync whatever the
// specs: the two ways a vanished twin is re-created besides RTM_DELLINK.
func TestTwinWatchBackstop(t *testing.T) {
	testenv.RequireRoot(t)
	ns := testenv.Netns(t, "tw")
	logBuf := &lockedBuffer{}
	log := slog.New(slog.NewTextHandler(logBuf, nil))
	m, err := hostpath.New(hostpath.Options{Netns: ns, Logger: log, Inject: func(*hostpath.Twin, []byte) bool { return true }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	spec := []hostpath.Spec{{Port: "eth1", MAC: wire.MAC{0x02, 0, 0, 0, 0, 1}}}
	if err := m.Sync(spec); err != nil {
		t.Fatal(err)
	}
	hp := &hostPath{d: &Daemon{log: log}, m: m, kick: make(chan struct{}, 1)}
	if hp.resyncDue() {
		t.Fatal("a Sync is due with every twin in place")
	}
	testenv.Run(t, "ip", "-n", ns, "link", "del", "nf-eth1")
	hp.watch.lastCheck = time.Time{} // the period has passed
	due := false
	for deadline := time.Now().Add(2 * time.Second); !due && time.Now().Before(deadline); {
		due = hp.resyncDue()
		hp.watch.lastCheck = time.Time{}
	}
	if !due || !strings.Contains(logBuf.String(), "twin gone; re-creating it") || !strings.Contains(logBuf.String(), "reason=deleted") {
		t.Fatalf("periodic check after ip link del: due %v, log:\n%s", due, logBuf.String())
	}
	if err := m.Sync(spec); err != nil {
		t.Fatal(err)
	}
	if hp.resyncDue() {
		t.Fatal("a Sync is still due after the twin was re-created")
	}
	hp.requestSync()
	if !hp.resyncDue() {
		t.Fatal("requestSync (reload) did not force a Sync")
	}
	if hp.resyncDue() {
		t.Fatal("a forced Sync is due twice")
	}
}

// lockedBuffer is a log sink for several goroutines (the twins' readers log
// too).
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
