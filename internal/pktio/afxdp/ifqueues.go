package afxdp

// ifqueues: how many queues of an interface an XDP socket can serve. A
// socket bound to queue q receives what the driver receives on RX queue q
// and transmits on TX queue q (copy mode drops its frames silently when q is
// not a real TX queue), so the usable count is the smaller of the two:
// ethtool's channels (rx + combined, tx + combined; veth reports its real
// queue counts there), or netlink's allocated counts where the driver has
// no channels.
//
// Locking: none; no state.

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ethtoolChannels mirrors struct ethtool_channels.
type ethtoolChannels struct {
	cmd                                         uint32
	maxRx, maxTx, maxOther, maxCombined         uint32
	rxCount, txCount, otherCount, combinedCount uint32
}

const ethtoolGChannels = 0x3c // ETHTOOL_GCHANNELS

// ifreqData is struct ifreq with the ifr_data pointer.
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [16]byte
}

// deviceQueues returns the number of queue pairs of the interface in the
// calling thread's network namespace.
func deviceQueues(name string, ifindex int) (int, error) {
	if n, ok := ethtoolQueues(name); ok {
		return n, nil
	}
	info, err := getLinkXDP(ifindex)
	if err != nil {
		return 0, fmt.Errorf("queue count: %w", err)
	}
	return max(1, min(info.rxQueues, info.txQueues)), nil
}

func ethtoolQueues(name string) (int, bool) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, false
	}
	defer unix.Close(fd)
	ch := ethtoolChannels{cmd: ethtoolGChannels}
	var req ifreqData
	copy(req.name[:unix.IFNAMSIZ-1], name)
	req.data = unsafe.Pointer(&ch)
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&req))); e != 0 {
		return 0, false
	}
	rx, tx := ch.rxCount+ch.combinedCount, ch.txCount+ch.combinedCount
	if rx == 0 || tx == 0 {
		return 0, false
	}
	return int(min(rx, tx)), true
}
