package nexthop

// Flow hashing for multipath selection. One flow must always hash the same
// way (no reordering across members), different flows should spread evenly,
// and a remote sender must not be able to aim many flows at one member, so the
// hash is keyed with a per-process random seed (like the kernel's siphash key).
//
// Locking: the seed is written once at init.

import (
	"crypto/rand"
	"encoding/binary"
	"math/bits"

	"github.com/netfwd/netfwd/wire"
)

var hashSeed = func() uint64 {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("nexthop: no randomness for the flow hash seed: " + err.Error())
	}
	return binary.LittleEndian.Uint64(b[:])
}()

// FlowKey is what multipath hashing looks at: the IPv4 5-tuple for the first
// fragment of TCP and UDP (Linux fib_multipath_hash_policy 1), the addresses
// and protocol alone otherwise (Ports zero).
type FlowKey struct {
	Src, Dst wire.Addr4
	Proto    uint8
	SrcPort  uint16
	DstPort  uint16
}

// FlowHash returns the keyed 32-bit hash of a flow.
func FlowHash(k FlowKey) uint32 {
	a := uint64(k.Src)<<32 | uint64(k.Dst)
	b := uint64(k.Proto)<<32 | uint64(k.SrcPort)<<16 | uint64(k.DstPort)
	return uint32(mix(mix(a^hashSeed, 0x9E3779B97F4A7C15)^b, 0xC2B2AE3D27D4EB4F) >> 32)
}

// mix is one 64x64->128 multiply folded back to 64 bits (wyhash's mum).
func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}
