package neigh

// Received ARP: learning and replies, as Linux's arp_process with its
// defaults (arp_accept 0, arp_ignore 0, no proxy ARP, drop_gratuitous_arp 0).
//
// Flow, for a frame that parses (parseARPFrame):
//   1. Ethernet destination must be us, broadcast or multicast (arp_rcv
//      ignores PACKET_OTHERHOST); targets that are multicast or loopback and
//      senders that are multicast, broadcast, zero-net, loopback or one of
//      our addresses are dropped (the kernel's route lookup rejects them as
//      martians; a sender MAC that is multicast or zero is dropped too:
//      a deliberate check, see docs/neigh.md).
//   2. Sender 0.0.0.0 (duplicate address detection): a request for one of
//      our addresses is answered, nothing is learned.
//   3. A request for one of our addresses: the sender's entry is created or
//      updated to STALE with the sender's address (neigh_event_ns), and the
//      reply is written into the caller's buffer. Under pressure (gc_thresh2
//      entries or more) an unknown sender is answered but not learned
//      (ARPNotLearned): a flood of requests from random senders cannot fill
//      the table the routes' next hops need; the check is lock-free, so such
//      a flood never takes the table lock either. Replies to senders not
//      learned are limited per worker (ARPRepliesLimited), so the flood
//      costs no transmit either.
//   4. Anything else (requests for other hosts, replies): only an existing
//      entry for the sender is updated: REACHABLE for a reply unicast to us,
//      STALE otherwise, overriding its address only after locktime or for
//      gratuitous ARP. Unknown senders create nothing (arp_accept 0).
//
// Locking: parsing and replies need no lock; learning takes Table.mu.
// The worker's counters are its own.

import (
	"time"

	"github.com/netfwd/netfwd/wire"
)

// ARPDrop is why a received ARP frame was dropped. The names are stable:
// metrics use them.
type ARPDrop uint8

const (
	ARPOK            ARPDrop = iota // not dropped
	ARPTruncated                    // shorter than an Ethernet ARP frame
	ARPNotARP                       // EtherType is not ARP
	ARPBadHardware                  // hardware type not Ethernet/IEEE 802
	ARPBadProtocol                  // protocol type not IPv4
	ARPBadAddrLen                   // hardware length not 6 or protocol length not 4
	ARPBadOpcode                    // neither request nor reply
	ARPOtherHost                    // Ethernet destination is another host
	ARPBadSenderMAC                 // sender MAC multicast, broadcast or zero
	ARPMartianSender                // sender IP multicast, broadcast, loopback or 0.0.0.0/8
	ARPSenderIsLocal                // sender IP is one of ours (address conflict)
	ARPBadTarget                    // target IP multicast or loopback
	ARPNoReplyBuffer                // the reply buffer is shorter than ARPFrameLen
	numARPDrops
)

var arpDropNames = [...]string{
	"ok", "truncated", "not_arp", "bad_hardware_type", "bad_protocol_type", "bad_address_length",
	"bad_opcode", "other_host", "bad_sender_mac", "martian_sender", "sender_is_local",
	"bad_target", "no_reply_buffer",
}

func (d ARPDrop) String() string {
	if int(d) < len(arpDropNames) {
		return arpDropNames[d]
	}
	return "unknown"
}

// parseARPFrame validates an Ethernet frame (no VLAN tag: the bridge strips
// it) that should carry ARP as arp_rcv and arp_process do (hardware type
// Ethernet or IEEE 802, protocol IPv4, address lengths 6 and 4, opcode
// request or reply) and returns the ARP view.
func parseARPFrame(frame []byte) (wire.ARP, ARPDrop) {
	if len(frame) < wire.ARPFrameLen {
		return nil, ARPTruncated
	}
	if wire.Ethernet(frame).Type() != wire.EtherTypeARP {
		return nil, ARPNotARP
	}
	a := wire.ARP(frame[wire.EthernetHeaderLen:wire.ARPFrameLen])
	switch {
	case a.HardwareType() != wire.ARPHardwareEther && a.HardwareType() != wire.ARPHardwareIEEE802:
		return nil, ARPBadHardware
	case a.ProtocolType() != wire.EtherTypeIPv4:
		return nil, ARPBadProtocol
	case a.HardwareLen() != 6 || a.ProtocolLen() != 4:
		return nil, ARPBadAddrLen
	case a.Op() != wire.ARPRequest && a.Op() != wire.ARPReply:
		return nil, ARPBadOpcode
	}
	return a, ARPOK
}

// LocalAddrs answers ARP's questions about the router's own addresses.
type LocalAddrs interface {
	// IsLocalAddr reports whether ip is an address the router answers ARP
	// for on interface ifindex. Linux's default (arp_ignore 0) answers for
	// any local address of the router, whatever interface it is on.
	IsLocalAddr(ifindex uint32, ip wire.Addr4) bool
}

// ARPInput names the receiving interface.
type ARPInput struct {
	IfIndex uint32
	IfMAC   wire.MAC
	Addrs   LocalAddrs
}

// InputARP processes one received ARP frame (Ethernet header first). When it
// answers, it writes the reply frame into reply and returns its length
// (transmit it on in.IfIndex); resolutions it causes append to out. drop is
// ARPOK unless the frame was dropped (counted by reason). The worker's
// counters become visible at its next Publish (once per batch: a flood of
// ARP costs no atomic stores per frame).
func (w *Worker) InputARP(in *ARPInput, frame []byte, now int64, reply []byte, out *Actions) (replyLen int, drop ARPDrop) {
	a, drop := parseARPFrame(frame)
	if drop != ARPOK {
		w.c[wcARPDropBase+int(drop)]++
		return 0, drop
	}
	op := a.Op()
	if op == wire.ARPRequest {
		w.c[wcARPRxRequests]++
	} else {
		w.c[wcARPRxReplies]++
	}
	eth := wire.Ethernet(frame)
	toUs := eth.Dst() == in.IfMAC
	if !toUs && !eth.DstIsMulticast() {
		return w.dropARP(ARPOtherHost)
	}
	sha, sip, tip := a.SenderMAC(), a.SenderIP(), a.TargetIP()
	if tip.IsMulticast() || tip.IsLoopback() {
		return w.dropARP(ARPBadTarget)
	}
	if !sha.IsValidUnicast() {
		return w.dropARP(ARPBadSenderMAC)
	}

	if sip == 0 { // duplicate address detection probe
		if op == wire.ARPRequest && in.Addrs.IsLocalAddr(in.IfIndex, tip) {
			if len(reply) < wire.ARPFrameLen {
				return w.dropARP(ARPNoReplyBuffer)
			}
			w.c[wcARPDAD]++
			w.c[wcARPTxReplies]++
			return wire.BuildARPReply(reply, in.IfMAC, tip, sha, 0), ARPOK
		}
		return 0, ARPOK
	}
	if sip.IsMartianSource() {
		return w.dropARP(ARPMartianSender)
	}
	if in.Addrs.IsLocalAddr(in.IfIndex, sip) {
		return w.dropARP(ARPSenderIsLocal)
	}

	t := w.t
	if op == wire.ARPRequest && in.Addrs.IsLocalAddr(in.IfIndex, tip) {
		key := entryKey(in.IfIndex, sip)
		known := true
		if t.learnPaused.Load() && t.index.Get(key) == nil {
			w.c[wcARPNotLearned]++ // lock-free: a flood from random senders ends here
			known = false
		} else {
			t.lockAt(now)
			n := t.index.Get(key)
			switch {
			case n != nil:
			case t.gcEntries >= t.p.GCThresh2:
				t.c.arpNotLearned++
			default:
				if n = t.createLocked(in.IfIndex, sip, in.IfMAC, false, now, out); n != nil {
					t.c.learned++
				}
			}
			if n != nil {
				t.updateLocked(n, &sha, NUDStale, updateOverride, now, out)
			}
			known = n != nil
			t.mu.Unlock()
		}
		// A sender that could not be learned is still answered (Linux
		// answers only when it could create the entry), but at most
		// unlearnedReplies per worker per unlearnedWindow: a flood from
		// random senders costs no transmit beyond that (docs/neigh.md).
		if !known && !w.unlearnedReplyAllowed(now) {
			w.c[wcARPRepliesLimited]++
			return 0, ARPOK
		}
		if len(reply) < wire.ARPFrameLen {
			return w.dropARP(ARPNoReplyBuffer)
		}
		w.c[wcARPTxReplies]++
		return wire.BuildARPReply(reply, in.IfMAC, tip, sha, sip), ARPOK
	}
	if op == wire.ARPRequest {
		w.c[wcARPRequestsNotLocal]++
	}

	t.lockAt(now)
	defer t.mu.Unlock()
	n := t.index.Get(entryKey(in.IfIndex, sip))
	if n == nil {
		t.c.arpUnsolicitedIgnored++
		return 0, ARPOK
	}
	// Gratuitous ARP (arp_is_garp): sender and target address equal, and
	// for a reply the target hardware address equal to the sender's.
	garp := sip == tip && (op == wire.ARPRequest || a.TargetMAC() == sha)
	flags := 0
	if now > n.updated+t.p.locktime || garp {
		flags = updateOverride
	}
	state := NUDStale
	if op == wire.ARPReply && toUs {
		state = NUDReachable
	}
	if t.updateLocked(n, &sha, state, flags, now, out) == nil {
		t.c.arpUpdates++
	}
	return 0, ARPOK
}

// Replies to senders that could not be learned: at most unlearnedReplies
// per worker in each unlearnedWindow (1,000/s per worker).
const (
	unlearnedReplies = 100
	unlearnedWindow  = int64(100 * time.Millisecond)
)

// unlearnedReplyAllowed takes one reply from the worker's budget for the
// current window.
func (w *Worker) unlearnedReplyAllowed(now int64) bool {
	if win := now / unlearnedWindow; win != w.replyWindow {
		w.replyWindow, w.repliesLeft = win, unlearnedReplies
	}
	if w.repliesLeft == 0 {
		return false
	}
	w.repliesLeft--
	return true
}

func (w *Worker) dropARP(d ARPDrop) (int, ARPDrop) {
	w.c[wcARPDropBase+int(d)]++
	return 0, d
}
