package vethlab

// Transmit checksum offload of a host's interface (ethtool -K IF tx off).
//
// Locking: none.

import (
	"fmt"
	"unsafe"

	"github.com/netfwd/netfwd/internal/pktio"
	"golang.org/x/sys/unix"
)

// ethtoolSTxCsum is ETHTOOL_STXCSUM: set transmit checksum offload.
const ethtoolSTxCsum = 0x17

// TxChecksumOff turns off transmit checksum offload (and so TSO) on iface
// in namespace ns: the kernel then finishes every checksum itself.
func TxChecksumOff(ns, iface string) error {
	return pktio.InNetns(ns, func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		val := struct{ cmd, data uint32 }{cmd: ethtoolSTxCsum}
		var req struct {
			name [unix.IFNAMSIZ]byte
			data unsafe.Pointer
			_    [16]byte
		}
		copy(req.name[:unix.IFNAMSIZ-1], iface)
		req.data = unsafe.Pointer(&val)
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&req))); e != 0 {
			return fmt.Errorf("%s in %s: transmit checksum offload off: %w", iface, ns, e)
		}
		return nil
	})
}
