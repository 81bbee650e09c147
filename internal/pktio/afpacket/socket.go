package afpacket

// socket: opening one AF_PACKET socket with github.com/mdlayher/packet and
// the socket options the library does not cover (rings, fanout, vnet
// headers, qdisc bypass), set through Conn.SyscallConn on the fd.
//
// Order matters (af_packet.c): PACKET_VERSION, PACKET_VNET_HDR and
// PACKET_RESERVE must precede the ring; the ring must precede mmap; fanout
// needs a bound socket. Sockets are opened with a drop-all filter so
// nothing queues on the socket before the ring exists; the real filter (or
// none) replaces it last.
//
// Locking: none; called from Open and NewTx under the Port's mutex.

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/mdlayher/packet"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/netfwd/netfwd/internal/pktio"
)

const ethPAll = unix.ETH_P_ALL

// dropAll is a classic BPF program that accepts nothing.
var dropAll = []bpf.RawInstruction{{Op: unix.BPF_RET | unix.BPF_K, K: 0}}

// rawSocket is one packet socket and its raw fd access: either a
// mdlayher/packet Conn in the Go netpoller (receive queues), or a bare fd
// outside it (transmit sockets, see openTxSocket).
type rawSocket struct {
	conn *packet.Conn
	file *os.File // a receive socket taken over from another process (handover.go), once polled
	rc   syscall.RawConn

	fd int // bare fd when conn and file are nil
	// adopted: taken over from another process; bare until poll (name is
	// the port's, for the os.File).
	adopted   bool
	name      string
	closeOnce sync.Once
}

// errNotPolled: a read of an adopted socket before SetQueuePositions put
// it into the netpoller.
var errNotPolled = errors.New("pktio: adopted socket read before the takeover (SetQueuePositions)")

// poll puts an adopted socket into the Go netpoller (a no-op for others
// and once done). Its owner's reads wait there from then on.
func (s *rawSocket) poll() error {
	if !s.adopted || s.file != nil {
		return nil
	}
	f := os.NewFile(uintptr(s.fd), s.name)
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	s.file, s.rc = f, rc
	return nil
}

// read runs fn in the netpoller's read loop (RawConn.Read).
func (s *rawSocket) read(fn func(fd uintptr) bool) error {
	if s.rc == nil {
		return errNotPolled
	}
	return s.rc.Read(fn)
}

// openSocket opens a SOCK_RAW packet socket bound to ifi for protocol proto
// (0: transmit only, receives nothing), with the drop-all filter installed.
func openSocket(ifi *net.Interface, proto int) (*rawSocket, error) {
	var cfg *packet.Config
	if proto != 0 {
		cfg = &packet.Config{Filter: dropAll}
	}
	c, err := packet.Listen(ifi, packet.Raw, proto, cfg)
	if err != nil {
		return nil, err
	}
	rc, err := c.SyscallConn()
	if err != nil {
		c.Close()
		return nil, err
	}
	return &rawSocket{conn: c, rc: rc}, nil
}

// openTxSocket opens a send-only packet socket (protocol 0: it receives
// nothing) on ifi, with x/sys/unix rather than the library: the socket
// stays out of the Go netpoller. Every skb sent from a socket wakes the
// socket's waiters when it is freed (sock_wfree -> sk_write_space); in the
// netpoller that is one epoll event, and often a thread wakeup, per frame.
// Waiting for room (rare) uses poll(2) instead.
func openTxSocket(ifi *net.Interface) (*rawSocket, error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: ifi.Index}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind %s: %w", ifi.Name, err)
	}
	return &rawSocket{fd: fd}, nil
}

// close closes the socket once. For a bare fd the owner must be done with
// it (Shutdown only sets the closed flags the owners poll).
func (s *rawSocket) close() error {
	var err error
	s.closeOnce.Do(func() {
		switch {
		case s.conn != nil:
			err = s.conn.Close()
		case s.file != nil:
			err = s.file.Close()
		default:
			err = unix.Close(s.fd)
		}
	})
	return err
}

// wake makes a blocked read return (with a timeout error) without closing
// the socket.
func (s *rawSocket) wake() {
	switch {
	case s.conn != nil:
		s.conn.SetReadDeadline(time.Unix(1, 0))
	case s.file != nil:
		s.file.SetReadDeadline(time.Unix(1, 0))
	}
}

// write runs fn until it returns true, waiting for the socket to become
// writable in between; it gives up with ErrClosed once closed is set.
func (s *rawSocket) write(fn func(fd uintptr) bool, closed *atomic.Bool) error {
	if s.rc != nil {
		return s.rc.Write(fn)
	}
	pfd := []unix.PollFd{{Fd: int32(s.fd), Events: unix.POLLOUT}}
	for !fn(uintptr(s.fd)) {
		if closed.Load() {
			return pktio.ErrClosed
		}
		// Bounded, so a shutdown is seen within the timeout.
		if _, err := unix.Poll(pfd, 50); err != nil && err != unix.EINTR {
			return err
		}
	}
	return nil
}

// control runs fn with the fd and returns the first error of either.
func (s *rawSocket) control(fn func(fd int) error) error {
	if s.rc == nil {
		return fn(s.fd)
	}
	var ferr error
	if err := s.rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

func (s *rawSocket) setInt(level, opt, val int, name string) error {
	err := s.control(func(fd int) error { return unix.SetsockoptInt(fd, level, opt, val) })
	if err != nil {
		return fmt.Errorf("setsockopt %s=%d: %w", name, val, err)
	}
	return nil
}

func (s *rawSocket) getInt(level, opt int, name string) (int, error) {
	var v int
	err := s.control(func(fd int) error {
		var err error
		v, err = unix.GetsockoptInt(fd, level, opt)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("getsockopt %s: %w", name, err)
	}
	return v, nil
}

// setRing configures a TPACKET_V3 ring (opt PACKET_RX_RING or
// PACKET_TX_RING).
func (s *rawSocket) setRing(opt int, req *unix.TpacketReq3) error {
	err := s.control(func(fd int) error { return unix.SetsockoptTpacketReq3(fd, unix.SOL_PACKET, opt, req) })
	if err != nil {
		return fmt.Errorf("setsockopt ring(%d) block=%d x %d: %w", opt, req.Block_size, req.Block_nr, err)
	}
	return nil
}

// mmap maps size bytes of the socket's rings (RX ring first, then TX),
// every page touched (pktio.Prefault).
func (s *rawSocket) mmap(size int) ([]byte, error) {
	var b []byte
	err := s.control(func(fd int) error {
		var err error
		b, err = unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("mmap ring %d bytes: %w", size, err)
	}
	pktio.Prefault(b) // before frames go through this mapping (prefault.go)
	return b, nil
}

// setFilter replaces the drop-all filter with prog, or removes it.
func (s *rawSocket) setFilter(prog []bpf.RawInstruction) error {
	if len(prog) > 0 {
		return s.conn.SetBPF(prog)
	}
	return s.setInt(unix.SOL_SOCKET, unix.SO_DETACH_FILTER, 0, "SO_DETACH_FILTER")
}

// joinFanout adds the socket to the port's hash fanout group. With id < 0
// it creates a group with a kernel-chosen unique id and returns it, so
// parallel ports (and test runs) never collide. With rollover, a frame
// whose queue is full goes to a sibling with room (Config.NoRollover).
// Every socket of a group must join with the same flags.
func (s *rawSocket) joinFanout(id int, rollover bool) (int, error) {
	arg := unix.PACKET_FANOUT_HASH << 16
	if rollover {
		arg |= unix.PACKET_FANOUT_FLAG_ROLLOVER << 16
	}
	if id < 0 {
		arg |= unix.PACKET_FANOUT_FLAG_UNIQUEID << 16
	} else {
		arg |= id
	}
	if err := s.setInt(unix.SOL_PACKET, unix.PACKET_FANOUT, arg, "PACKET_FANOUT"); err != nil {
		return 0, err
	}
	if id >= 0 {
		return id, nil
	}
	v, err := s.getInt(unix.SOL_PACKET, unix.PACKET_FANOUT, "PACKET_FANOUT")
	if err != nil {
		return 0, err
	}
	return v & 0xffff, nil
}

// ringStats reads and clears the kernel's ring counters (PACKET_STATISTICS
// is clear-on-read).
func (s *rawSocket) ringStats() (unix.TpacketStatsV3, error) {
	var st *unix.TpacketStatsV3
	err := s.control(func(fd int) error {
		var err error
		st, err = unix.GetsockoptTpacketStatsV3(fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
		return err
	})
	if err != nil || st == nil {
		return unix.TpacketStatsV3{}, err
	}
	return *st, nil
}

// rolloverStats reads the kernel's rollover counters of a fanout member
// (PACKET_ROLLOVER_STATS, struct tpacket_rollover_stats: frames this
// socket's queue rolled over to a sibling, of them for flows that
// dominate, and rollovers that found no sibling with room). Not
// clear-on-read: totals since the socket joined.
func (s *rawSocket) rolloverStats() (all, huge, failed uint64, err error) {
	var st [3]uint64
	err = s.control(func(fd int) error {
		l := uint32(unsafe.Sizeof(st))
		_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_PACKET, unix.PACKET_ROLLOVER_STATS,
			uintptr(unsafe.Pointer(&st[0])), uintptr(unsafe.Pointer(&l)), 0)
		if e != 0 {
			return e
		}
		return nil
	})
	return st[0], st[1], st[2], err
}

// setTxOptions applies the transmit options of cfg to a socket.
func (s *rawSocket) setTxOptions(cfg *Config) error {
	if !cfg.NoQdiscBypass {
		if err := s.setInt(unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1, "PACKET_QDISC_BYPASS"); err != nil {
			return err
		}
	}
	if cfg.SndBuf > 0 {
		if err := s.setInt(unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, cfg.SndBuf, "SO_SNDBUFFORCE"); err != nil {
			if !errors.Is(err, unix.EPERM) {
				return err
			}
			if err := s.setInt(unix.SOL_SOCKET, unix.SO_SNDBUF, cfg.SndBuf, "SO_SNDBUF"); err != nil {
				return err
			}
		}
	}
	return nil
}

// Kernel layout of a TPACKET_V3 ring (linux/if_packet.h), read in place.
const (
	// block descriptor: version, offset_to_priv, then tpacket_hdr_v1.
	blkStatusOff   = 8
	blkNumPktsOff  = 12
	blkFirstPktOff = 16
	blkHdrLen      = 48 // BLK_PLUS_PRIV(0), 8-aligned

	tpacket3HdrLen  = 48 // TPACKET_ALIGN(sizeof(struct tpacket3_hdr))
	sockaddrLLLen   = 20
	sllPkttypeInSLL = 10 // sll_pkttype within struct sockaddr_ll
	// tp_hdrlen of V3: the kernel puts the MAC header at
	// TPACKET_ALIGN(tp_hdrlen + max(maclen, 16)) + reserve (+10 vnet) - maclen.
	tpacket3HdrLenWithSLL = tpacket3HdrLen + sockaddrLLLen
)

// tpacket3Hdr mirrors struct tpacket3_hdr.
type tpacket3Hdr struct {
	nextOffset uint32
	sec        uint32
	nsec       uint32
	snaplen    uint32
	len        uint32
	status     uint32
	mac        uint16
	net        uint16
	rxhash     uint32
	vlanTCI    uint32
	vlanTPID   uint16
	_          uint16
	_          [8]byte
}

var _ [tpacket3HdrLen - unsafe.Sizeof(tpacket3Hdr{})]struct{}
var _ [unsafe.Sizeof(tpacket3Hdr{}) - tpacket3HdrLen]struct{}
