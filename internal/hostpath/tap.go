package hostpath

// TAP devices: opening one in a network namespace, and the virtio-net
// header that travels in front of every frame written to or read from it.
//
// The device is created with IFF_TAP (Ethernet frames), IFF_NO_PI (no
// packet-information prefix), IFF_VNET_HDR (a 10-byte virtio-net header in
// front of each frame, so a punted GSO super-frame or a frame with a partial
// checksum is handed to the kernel as such, as a virtio NIC would) and
// IFF_TUN_EXCL (create only: never attach to someone else's device). With
// Options.Persist it is made persistent (TUNSETPERSIST), so it outlives the
// process and the next one attaches to it again (attachTAP: the same flags
// without IFF_TUN_EXCL) or takes the very file a keeper holds (keeper.go);
// without, it vanishes when the file is closed, also by the kernel when the
// process dies. The fd is non-blocking and lives in the Go
// netpoller: a reader waiting for the kernel's next frame parks a goroutine,
// not a thread. No offloads are enabled (TUNSETOFFLOAD), so the kernel
// checksums and segments everything it sends before we read it.
//
// The device belongs to the namespace of the thread that opened
// /dev/net/tun (the open creates the socket the device hangs on), so the
// open runs in pktio.InNetns; everything after works from any thread.
//
// Locking: none here; the file is shared by the twin's reader and writer
// goroutines and by SetCarrier, which os.File allows.

import (
	"errors"
	"fmt"
	"os"

	"github.com/netfwd/netfwd/internal/pktio"
	"github.com/netfwd/netfwd/wire"
	"golang.org/x/sys/unix"
)

// errNameTaken: TUNSETIFF with IFF_TUN_EXCL found the name in use.
var errNameTaken = errors.New("interface name in use")

// tapFlags are the flags every twin's file is attached with.
const tapFlags = unix.IFF_TAP | unix.IFF_NO_PI | unix.IFF_VNET_HDR

// openTAP creates the TAP device name in the namespace netns, persistent
// if persist.
func openTAP(netns, name string, persist bool) (*os.File, error) {
	f, err := tunSetIff(netns, name, tapFlags|unix.IFF_TUN_EXCL)
	if err != nil {
		return nil, err
	}
	if persist {
		if err := tunIoctl(f, unix.TUNSETPERSIST, 1); err != nil {
			f.Close()
			return nil, err
		}
	}
	return f, nil
}

// attachTAP attaches to the existing single-queue TAP name: errNameTaken
// (EBUSY) when some file holds it.
func attachTAP(netns, name string) (*os.File, error) {
	return tunSetIff(netns, name, tapFlags)
}

// tunSetIff opens /dev/net/tun in netns and attaches it to name.
func tunSetIff(netns, name string, flags uint16) (*os.File, error) {
	fd := -1
	err := pktio.InNetns(netns, func() error {
		var err error
		fd, err = unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("open /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	ifr.SetUint16(flags)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EBUSY) {
			return nil, errNameTaken
		}
		return nil, fmt.Errorf("TUNSETIFF: %w", err)
	}
	if got := ifr.Name(); got != name {
		unix.Close(fd)
		return nil, fmt.Errorf("TUNSETIFF: kernel named the device %q", got)
	}
	// os.NewFile sees the non-blocking flag and registers the fd with the
	// netpoller.
	return os.NewFile(uintptr(fd), "tap:"+name), nil
}

// tunIoctl runs a tun ioctl whose argument is the integer itself
// (TUNSETPERSIST) on f.
func tunIoctl(f *os.File, req uint, v int) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ierr error
	if err := rc.Control(func(fd uintptr) { ierr = unix.IoctlSetInt(int(fd), req, v) }); err != nil {
		return err
	}
	if ierr != nil {
		return fmt.Errorf("tun ioctl %#x: %w", req, ierr)
	}
	return nil
}

// tapFileOf checks that f is attached to the TAP name with the twins'
// flags (TUNGETIFF) and makes it non-blocking: for a file taken from a
// keeper.
func tapFileOf(fd int, name string) (*os.File, error) {
	ifr, err := unix.NewIfreq("")
	if err != nil {
		return nil, err
	}
	if err := unix.IoctlIfreq(fd, unix.TUNGETIFF, ifr); err != nil {
		return nil, fmt.Errorf("TUNGETIFF: %w", err)
	}
	if got, fl := ifr.Name(), ifr.Uint16(); got != name || fl&(unix.IFF_TAP|unix.IFF_TUN|unix.IFF_MULTI_QUEUE) != unix.IFF_TAP || fl&tapFlags != tapFlags {
		return nil, fmt.Errorf("the keeper's file is attached to %q with flags %#x, not to the TAP %s", got, fl, name)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), "tap:"+name), nil
}

// errHeld: another file has the TAP attached.
var errHeld = errors.New("held open by another process")

// releaseTAP removes the existing TAP li if no file holds it (a persistent
// leftover), or returns errHeld. Whether a single-queue TAP is held can only
// be learned by trying to attach to it (the kernel reports queue counts for
// multi-queue devices only): attaching fails with EBUSY when it is held;
// when it succeeds we hold it, make it non-persistent and close it, and the
// kernel removes it. A multi-queue TAP is deleted when its queue count is
// zero.
func (c *rtnl) releaseTAP(netns string, li linkInfo) error {
	if li.tunMultiQueue {
		if li.tunQueues > 0 {
			return errHeld
		}
		return c.delLink(li.index)
	}
	fd := -1
	err := pktio.InNetns(netns, func() error {
		var err error
		fd, err = unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return fmt.Errorf("open /dev/net/tun: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(li.name)
	if err != nil {
		return err
	}
	ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI)
	switch err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); {
	case errors.Is(err, unix.EBUSY):
		return errHeld
	case err != nil:
		return fmt.Errorf("attaching to the leftover TAP: %w", err)
	}
	if err := unix.IoctlSetInt(fd, unix.TUNSETPERSIST, 0); err != nil {
		return fmt.Errorf("TUNSETPERSIST: %w", err)
	}
	return nil // the deferred close removes it
}

// setCarrier is TUNSETCARRIER: the device's carrier, as a NIC's link.
func setCarrier(f *os.File, up bool) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	v := 0
	if up {
		v = 1
	}
	var ierr error
	if err := rc.Control(func(fd uintptr) {
		ierr = unix.IoctlSetPointerInt(int(fd), unix.TUNSETCARRIER, v)
	}); err != nil {
		return err
	}
	if ierr != nil {
		return fmt.Errorf("TUNSETCARRIER: %w", ierr)
	}
	return nil
}

// finishVnetFrame makes a frame read from the TAP complete: it completes a
// partial checksum its virtio-net header h announces. It reports false for
// what cannot be sent as one frame (a GSO super-frame: never produced
// without offloads) or a header that points outside the frame.
func finishVnetFrame(h, frame []byte) bool {
	vh := wire.DecodeVirtioNetHdr(h)
	if vh.GSOType != wire.VirtioNetGSONone {
		return false
	}
	if vh.Flags&wire.VirtioNetFlagNeedsCsum == 0 {
		return true
	}
	return wire.CompletePartialChecksum(frame, int(vh.CsumStart), int(vh.CsumOffset))
}
