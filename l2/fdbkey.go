package l2

// The packed FDB key: the FDB and the multicast filter key frames by
// {MAC, VID} packed into one uint64, MAC in the high 48 bits, VID in the low
// 16 bits (only 12 are used). Key 0 (zero MAC, VID 0) never names a valid
// entry because the zero MAC is rejected everywhere, so hash tables use 0 as
// "empty".

import (
	"encoding/binary"

	"github.com/netfwd/netfwd/wire"
)

// fdbKey packs {MAC, VID} into the 8-byte FDB key.
func fdbKey(m wire.MAC, vid uint16) uint64 {
	return uint64(binary.BigEndian.Uint16(m[0:2]))<<48 |
		uint64(binary.BigEndian.Uint32(m[2:6]))<<16 | uint64(vid)
}

// fdbKeyAt reads the MAC at b[0:6] (a frame's destination at 0, source at 6)
// and packs it with vid, without building a MAC value.
// b must have at least 8 bytes (true for both MACs of a frame that passed
// parseFrame): one 8-byte load, the 2 bytes after the MAC masked off.
func fdbKeyAt(b []byte, vid uint16) uint64 {
	return binary.BigEndian.Uint64(b[0:8])&^0xffff | uint64(vid)
}

// keyMAC and keyVID unpack a key.
func keyMAC(k uint64) wire.MAC {
	var m wire.MAC
	binary.BigEndian.PutUint16(m[0:2], uint16(k>>48))
	binary.BigEndian.PutUint32(m[2:6], uint32(k>>16))
	return m
}

func keyVID(k uint64) uint16 { return uint16(k) }
