package rtnl

// LinkTable maps the interface indices of one network namespace to names
// (routes and nexthops name their device by ifindex), kept current from
// RTM_NEWLINK/RTM_DELLINK.
//
// Flow: Follow dumps the links, then applies link notifications until told
// to stop; a receive buffer overrun re-dumps. Apply takes single messages
// (the kernel mirror feeds its own socket's link messages to it). Readers
// ask Name on a miss-prone path (a new interface's first route can race its
// RTM_NEWLINK): Resolve asks the kernel for that one index.
//
// Locking: mu guards the maps; Name takes the read lock.

import (
	"errors"
	"sync"
	"time"
)

// LinkTable is the ifindex -> name map of one namespace.
type LinkTable struct {
	mu    sync.RWMutex
	names map[uint32]string // guarded by mu
	flags map[uint32]uint32 // guarded by mu
}

// NewLinkTable returns an empty table.
func NewLinkTable() *LinkTable {
	return &LinkTable{names: map[uint32]string{}, flags: map[uint32]uint32{}}
}

// Name returns the name of interface index i.
func (t *LinkTable) Name(i uint32) (string, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	n, ok := t.names[i]
	return n, ok
}

// Flags returns the interface flags (IFF_*) of index i.
func (t *LinkTable) Flags(i uint32) (uint32, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	f, ok := t.flags[i]
	return f, ok
}

// Index returns the index of the interface named name.
func (t *LinkTable) Index(name string) (uint32, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for i, n := range t.names {
		if n == name {
			return i, true
		}
	}
	return 0, false
}

// Apply updates the table from one link message (other types are ignored).
func (t *LinkTable) Apply(typ uint16, body []byte) error {
	if typ != RTM_NEWLINK && typ != RTM_DELLINK {
		return nil
	}
	var l Link
	if err := l.Decode(body); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if typ == RTM_DELLINK {
		delete(t.names, l.Index)
		delete(t.flags, l.Index)
		return nil
	}
	if l.Name != "" {
		t.names[l.Index] = l.Name
	}
	t.flags[l.Index] = l.Flags
	return nil
}

// Follow fills the table from a dump on c (a socket joined to
// RTNLGRP_LINK, with a read timeout so stop is noticed) and applies link
// notifications until stop is closed. It closes c when it returns.
func (t *LinkTable) Follow(c *Conn, stop <-chan struct{}) error {
	defer c.Close()
	apply := func(h Header, body []byte) error { return t.Apply(h.Type, body) }
	dump := func() error {
		for {
			err := c.Dump(RTM_GETLINK, AF_UNSPEC, apply, apply)
			if !errors.Is(err, ErrTimeout) && !errors.Is(err, ErrOverrun) {
				return err
			}
			select {
			case <-stop:
				return nil
			default:
			}
		}
	}
	if err := dump(); err != nil {
		return err
	}
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		b, err := c.Receive()
		switch {
		case errors.Is(err, ErrTimeout):
			continue
		case errors.Is(err, ErrOverrun):
			if err := dump(); err != nil {
				return err
			}
			continue
		case err != nil:
			return err
		}
		for len(b) > 0 {
			h, body, rest, err := NextMessage(b)
			if err != nil {
				break
			}
			b = rest
			t.Apply(h.Type, body)
		}
	}
}

// Resolve asks the kernel for interface index i on c (a socket no other
// goroutine reads) and records the answer.
func (t *LinkTable) Resolve(c *Conn, i uint32) (string, bool) {
	body := make([]byte, SizeofIfInfomsg)
	body[0] = AF_UNSPEC
	putU32(body[4:], i)
	seq, err := c.Request(RTM_GETLINK, 0, body)
	if err != nil {
		return "", false
	}
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		b, err := c.Receive()
		if errors.Is(err, ErrTimeout) {
			continue
		}
		if err != nil {
			return "", false
		}
		for len(b) > 0 {
			h, body, rest, err := NextMessage(b)
			if err != nil {
				return "", false
			}
			b = rest
			if !c.IsReply(h, seq) {
				continue
			}
			if h.Type == NLMSG_ERROR {
				return "", false
			}
			t.Apply(h.Type, body)
			return t.Name(i)
		}
	}
	return "", false
}
