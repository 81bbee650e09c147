package vethlab

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/internal/testenv"
	"github.com/netfwd/netfwd/wire"
)

// TestSweepStaleLabs: namespaces of a lab whose process died are removed by
// the next NewLab; a live process's lab is kept.
func TestSweepStaleLabs(t *testing.T) {
	testenv.RequireRoot(t)
	live, err := NewLab()
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	ns, err := live.AddNetns("L")
	if err != nil {
		t.Fatal(err)
	}
	// A lab left by a process that no longer exists.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale := &Lab{Prefix: "nfdead" + strconv.Itoa(dead.Process.Pid%100)}
	if err := os.WriteFile(filepath.Join(LabStateDir, stale.Prefix), []byte(strconv.Itoa(dead.Process.Pid)), 0o600); err != nil {
		t.Fatal(err)
	}
	sns, err := stale.AddNetns("S")
	if err != nil {
		t.Fatal(err)
	}
	SweepStaleLabs()
	if _, err := os.Stat(pktio.NetnsPath(sns)); !errors.Is(err, os.ErrNotExist) {
		stale.Close()
		t.Errorf("stale namespace %s survived the sweep", sns)
	}
	if _, err := os.Stat(pktio.NetnsPath(ns)); err != nil {
		t.Errorf("live namespace %s removed: %v", ns, err)
	}
}

func TestBuildUDPFrame(t *testing.T) {
	f := make([]byte, 64)
	BuildUDPFrame(f, net.HardwareAddr{2, 0, 0, 0, 0, 1}, net.HardwareAddr{2, 0, 0, 0, 0, 2}, 7,
		netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), 1000, 9)
	const ip = 18 // behind one tag
	if binary.BigEndian.Uint16(f[12:]) != wire.EtherTypeVLAN || binary.BigEndian.Uint16(f[16:]) != wire.EtherTypeIPv4 {
		t.Fatalf("ethertypes %x", f[12:18])
	}
	if wire.Checksum(f[ip:ip+20]) != 0 {
		t.Error("IPv4 header checksum invalid")
	}
	if binary.BigEndian.Uint32(f[ip+28:]) != BlastMagic || binary.BigEndian.Uint16(f[ip+24:]) != 64-18-20 {
		t.Error("UDP header or magic wrong")
	}
	if !IsBlasterFrame(f) {
		t.Error("IsBlasterFrame does not recognise it")
	}
}
