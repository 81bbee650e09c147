package neigh

// Received ARP: learning and replies, as Linux's arp_process with its
// defaults (arp_accept 0, arp_ignore 0, no proxy ARP, drop_gratuitous_arp 0).
//
// Flow, for a frame that parses (ParseARPFrame):
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
//      reply is written into the caller's buffer.
//   4. Anything else (requests for other hosts, replies): only an existing
//      entry for the sender is updated: REACHABLE for a reply unicast to us,
//      STALE otherwise, overriding its address only after locktime or for
//      gratuitous ARP. Unknown senders create nothing (arp_accept 0).
//
// Locking: parsing and replies need no lock; learning takes Table.mu.
// The worker's counters are its own.

// LocalAddrs answers ARP's questions about the router's own addresses.
type LocalAddrs interface {
	// IsLocalAddr reports whether ip is an address the router answers ARP
	// for on interface ifindex. Linux's default (arp_ignore 0) answers for
	// any local address of the router, whatever interface it is on.
	IsLocalAddr(ifindex, ip uint32) bool
}

// ARPInput names the receiving interface.
type ARPInput struct {
	IfIndex uint32
	IfMAC   [6]byte
	Addrs   LocalAddrs
}

// InputARP processes one received ARP frame (Ethernet header first). When it
// answers, it writes the reply frame into reply and returns its length
// (transmit it on in.IfIndex); resolutions it causes append to out. drop is
// ARPOK unless the frame was dropped (counted by reason).
func (w *Worker) InputARP(in *ARPInput, frame []byte, now int64, reply []byte, out *Actions) (replyLen int, drop ARPDrop) {
	defer w.Publish()
	a, drop := ParseARPFrame(frame)
	if drop != ARPOK {
		w.c[wcARPDropBase+int(drop)]++
		return 0, drop
	}
	op := a.Op()
	if op == ARPRequestOp {
		w.c[wcARPRxRequests]++
	} else {
		w.c[wcARPRxReplies]++
	}
	var dst [6]byte
	copy(dst[:], frame[0:6])
	toUs := dst == in.IfMAC
	if !toUs && dst[0]&1 == 0 {
		return w.dropARP(ARPOtherHost)
	}
	sha, sip, tip := a.SenderMAC(), a.SenderIP(), a.TargetIP()
	if tip>>28 == 0xe || tip>>24 == 127 { // multicast, loopback
		return w.dropARP(ARPBadTarget)
	}
	if sha[0]&1 != 0 || sha == [6]byte{} {
		return w.dropARP(ARPBadSenderMAC)
	}

	if sip == 0 { // duplicate address detection probe
		if op == ARPRequestOp && in.Addrs.IsLocalAddr(in.IfIndex, tip) {
			if len(reply) < ARPFrameLen {
				return w.dropARP(ARPNoReplyBuffer)
			}
			w.c[wcARPDAD]++
			w.c[wcARPTxReplies]++
			return BuildARPReply(reply, in.IfMAC, tip, sha, 0), ARPOK
		}
		return 0, ARPOK
	}
	if martianSource(sip) {
		return w.dropARP(ARPMartianSender)
	}
	if in.Addrs.IsLocalAddr(in.IfIndex, sip) {
		return w.dropARP(ARPSenderIsLocal)
	}

	t := w.t
	if op == ARPRequestOp && in.Addrs.IsLocalAddr(in.IfIndex, tip) {
		t.lockAt(now)
		n := t.index.Load().lookup(entryKey(in.IfIndex, sip))
		if n == nil {
			if n = t.createLocked(in.IfIndex, sip, in.IfMAC, false, now, out); n != nil {
				t.c.learned++
			}
		}
		if n != nil {
			t.updateLocked(n, &sha, NUDStale, updateOverride, now, out)
		}
		t.mu.Unlock()
		// Answered even when the table is full (Linux only answers when it
		// could create the entry; see docs/neigh.md).
		if len(reply) < ARPFrameLen {
			return w.dropARP(ARPNoReplyBuffer)
		}
		w.c[wcARPTxReplies]++
		return BuildARPReply(reply, in.IfMAC, tip, sha, sip), ARPOK
	}
	if op == ARPRequestOp {
		w.c[wcARPRequestsNotLocal]++
	}

	t.lockAt(now)
	defer t.mu.Unlock()
	n := t.index.Load().lookup(entryKey(in.IfIndex, sip))
	if n == nil {
		t.c.arpUnsolicitedIgnored++
		return 0, ARPOK
	}
	// Gratuitous ARP (arp_is_garp): sender and target address equal, and
	// for a reply the target hardware address equal to the sender's.
	garp := sip == tip && (op == ARPRequestOp || a.TargetMAC() == sha)
	flags := 0
	if now > n.updated+t.p.locktime || garp {
		flags = updateOverride
	}
	state := NUDStale
	if op == ARPReplyOp && toUs {
		state = NUDReachable
	}
	if t.updateLocked(n, &sha, state, flags, now, out) == nil {
		t.c.arpUpdates++
	}
	return 0, ARPOK
}

func (w *Worker) dropARP(d ARPDrop) (int, ARPDrop) {
	w.c[wcARPDropBase+int(d)]++
	return 0, d
}

// martianSource: sender addresses the kernel's input route lookup rejects
// (multicast, limited broadcast, 0.0.0.0/8, loopback).
func martianSource(ip uint32) bool {
	return ip>>24 == 0 || ip>>24 == 127 || ip>>28 == 0xe || ip == 0xffffffff
}
