package afxdp

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/internal/pktio/pktiotest"
)

// xdpOn returns the id and name of the XDP program on iface in ns (0, ""
// with none).
func xdpOn(t testing.TB, ns, iface string) (uint32, string) {
	t.Helper()
	var id uint32
	name := ""
	err := pktio.InNetns(ns, func() error {
		ifi, err := net.InterfaceByName(iface)
		if err != nil {
			return err
		}
		info, err := getLinkXDP(ifi.Index)
		if err != nil {
			return err
		}
		if info.attached == xdpAttachedNone {
			return nil
		}
		id = info.progID
		p, err := ebpf.NewProgramFromID(ebpf.ProgramID(id))
		if err != nil {
			return err
		}
		defer p.Close()
		pi, err := p.Info()
		if err != nil {
			return err
		}
		name = pi.Name
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return id, name
}

// waitNoXDP waits up to 3 s for iface to have no XDP program.
func waitNoXDP(t testing.TB, ns, iface string) {
	t.Helper()
	for deadline := time.Now().Add(3 * time.Second); ; {
		id, name := xdpOn(t, ns, iface)
		if id == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still runs XDP program %d (%s)", iface, id, name)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestXDPCloseDetaches: the program is on the interface while the port is
// open and gone after Close; DetachXDPPrograms removes it too.
func TestXDPCloseDetaches(t *testing.T) {
	p := pktiotest.NewPair(t)
	port := openXDPIn(t, p.NsB, p.B, PortConfig{})
	if id, name := xdpOn(t, p.NsB, p.B); id == 0 || name != xdpProgName {
		t.Fatalf("after Open: program %d %q", id, name)
	}
	if err := port.Close(); err != nil {
		t.Fatal(err)
	}
	waitNoXDP(t, p.NsB, p.B)

	port = openXDPIn(t, p.NsB, p.B, PortConfig{})
	DetachXDPPrograms()
	waitNoXDP(t, p.NsB, p.B)
	if err := port.Close(); err != nil {
		t.Errorf("Close after DetachXDPPrograms: %v", err)
	}
}

// TestXDPHelperProcess is the child of TestXDPKilledProcessLeavesNothing:
// it opens the port named in NETFWD_XDP_HELPER ("netns iface"), binds a
// socket, says "ready" and waits to be killed.
func TestXDPHelperProcess(t *testing.T) {
	arg := os.Getenv("NETFWD_XDP_HELPER")
	if arg == "" {
		t.Skip("helper process only")
	}
	ns, iface, _ := strings.Cut(arg, " ")
	var port *Port
	if err := pktio.InNetns(ns, func() error {
		var err error
		port, err = Open(iface, PortConfig{})
		return err
	}); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	w, err := NewWorker(WorkerConfig{})
	if err == nil {
		_, err = w.Bind(port, 0)
	}
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("ready")
	time.Sleep(time.Minute)
	os.Exit(2)
}

// TestXDPKilledProcessLeavesNothing: a process killed with SIGKILL while
// its program is attached and its socket bound leaves no program on the
// interface (bpf_link), and the next start attaches and binds the same
// queue cleanly.
func TestXDPKilledProcessLeavesNothing(t *testing.T) {
	p := pktiotest.NewPair(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestXDPHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "NETFWD_XDP_HELPER="+p.NsB+" "+p.B)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if l := sc.Text(); l == "ready" || strings.HasPrefix(l, "error:") {
				line <- l
				return
			}
		}
		line <- "no answer"
	}()
	select {
	case l := <-line:
		if l != "ready" {
			t.Fatalf("helper: %s", l)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("helper did not get ready")
	}
	if id, name := xdpOn(t, p.NsB, p.B); id == 0 || name != xdpProgName {
		t.Fatalf("helper's program not attached: %d %q", id, name)
	}
	if err := cmd.Process.Signal(unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	waitNoXDP(t, p.NsB, p.B)

	// Restart: attach and bind queue 0 again right away; frames flow.
	port := openXDPIn(t, p.NsB, p.B, PortConfig{})
	w := newXDPWorker(t, WorkerConfig{})
	s, err := w.Bind(port, 0)
	if err != nil {
		t.Fatalf("bind after the killed process: %v", err)
	}
	c := pktiotest.RawSender(t, p.NsA, p.A)
	f := pktiotest.Frame(rand.New(rand.NewPCG(5, 6)), port.MAC, pktiotest.MAC(t, p.NsA, p.A), 100)
	pktiotest.Send(t, c, f)
	if got, _ := pktiotest.RecvN(t, s, 1, 2*time.Second); len(got) != 1 {
		t.Fatal("no frame after restart")
	}
}

// TestXDPReplacesStaleProgram: a netfwd program left on an interface by a
// netlink attach (it outlives its process) is replaced on start; another
// program is reported and left alone.
func TestXDPReplacesStaleProgram(t *testing.T) {
	p := pktiotest.NewPair(t)
	attachLegacy := func(name string) {
		t.Helper()
		err := pktio.InNetns(p.NsB, func() error {
			ifi, err := net.InterfaceByName(p.B)
			if err != nil {
				return err
			}
			prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: name, Type: ebpf.XDP, License: "Dual BSD/GPL",
				Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, xdpPass), asm.Return()}})
			if err != nil {
				return err
			}
			defer prog.Close() // the attachment keeps it alive
			return setLinkXDP(ifi.Index, prog.FD(), unix.XDP_FLAGS_DRV_MODE)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	attachLegacy(xdpProgName)
	stale, _ := xdpOn(t, p.NsB, p.B)
	port := openXDPIn(t, p.NsB, p.B, PortConfig{})
	if id, name := xdpOn(t, p.NsB, p.B); id == stale || name != xdpProgName {
		t.Fatalf("stale program %d still there (now %d %q)", stale, id, name)
	}
	port.Close()
	waitNoXDP(t, p.NsB, p.B)

	attachLegacy("other_prog")
	other, _ := xdpOn(t, p.NsB, p.B)
	err := pktio.InNetns(p.NsB, func() error {
		_, err := Open(p.B, PortConfig{})
		return err
	})
	if !errors.Is(err, errForeignXDP) {
		t.Fatalf("Open over a foreign program: %v, want errForeignXDP", err)
	}
	t.Log(err)
	if id, name := xdpOn(t, p.NsB, p.B); id != other || name != "other_prog" {
		t.Errorf("foreign program replaced: now %d %q", id, name)
	}
}
