package l3

// IP identification of the packets the router originates (ICMP). A global
// counter started at a random value is enough for packets that are never
// fragmented; Linux hashes per destination, which matters for TCP, not here.
//
// Locking: one atomic counter.

import (
	"crypto/rand"
	"encoding/binary"
	"sync/atomic"
)

var ipID atomic.Uint32

func init() {
	var b [4]byte
	rand.Read(b[:])
	ipID.Store(binary.LittleEndian.Uint32(b[:]))
}

func nextIPID() uint16 { return uint16(ipID.Add(1)) }
