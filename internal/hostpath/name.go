package hostpath

// Twin names. A twin cannot take its port's name (the port is a kernel
// interface in the same namespace), so the default is a fixed prefix plus
// the port's name. Linux names are at most 15 bytes (IFNAMSIZ - 1); names
// that do not fit are cut and given a hash of the whole name. Short results
// are at most 14 bytes and hashed ones exactly 15, so a hashed name can
// never equal the plain name of another port; two hashed names collide only
// if their first 7 bytes and 25 bits of hash agree, and Sync refuses
// duplicate names anyway.
//
// Locking: none; pure functions.

import (
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
)

// NamePrefix starts every default twin name.
const NamePrefix = "nf-"

// maxNameLen is IFNAMSIZ - 1.
const maxNameLen = 15

// hashLen is how many base-32 digits of the hash a cut name ends with.
const hashLen = 5

// DefaultName is the twin name of port when the configuration gives none:
// "nf-" + port when that has at most 14 bytes, else "nf-" + the first 7
// bytes of port + 5 base-32 digits of an FNV-1a hash of the whole name.
func DefaultName(port string) string {
	if len(NamePrefix)+len(port) < maxNameLen {
		return NamePrefix + port
	}
	h := fnv.New64a()
	h.Write([]byte(port))
	sum := h.Sum64()
	const digits = "0123456789abcdefghijklmnopqrstuv"
	var tail [hashLen]byte
	for i := range tail {
		tail[i] = digits[sum&31]
		sum >>= 5
	}
	keep := maxNameLen - len(NamePrefix) - hashLen
	return NamePrefix + port[:keep] + string(tail[:])
}

// checkName applies the kernel's dev_valid_name.
func checkName(name string) error {
	switch {
	case name == "":
		return errors.New("empty interface name")
	case len(name) > maxNameLen:
		return fmt.Errorf("interface name %q longer than %d bytes", name, maxNameLen)
	case name == "." || name == "..":
		return fmt.Errorf("invalid interface name %q", name)
	case strings.ContainsAny(name, "/: \t\n\v\f\r"):
		return fmt.Errorf("invalid interface name %q (no '/', ':' or white space)", name)
	}
	return nil
}
