package hostpath

import (
	"fmt"
	"strings"
	"testing"
)

func TestDefaultName(t *testing.T) {
	for port, want := range map[string]string{
		"eth1":        "nf-eth1",
		"vlan10":      "nf-vlan10",
		"enp0s31f6ab": "nf-enp0s31f6ab", // 11 bytes: still plain (14)
	} {
		if got := DefaultName(port); got != want {
			t.Errorf("DefaultName(%q) = %q, want %q", port, got, want)
		}
	}
	long := "enp129s0f1np0"
	n := DefaultName(long)
	if len(n) != maxNameLen || !strings.HasPrefix(n, NamePrefix+long[:7]) || n != DefaultName(long) {
		t.Errorf("DefaultName(%q) = %q: want 15 bytes, prefix + first 7 bytes + hash, deterministic", long, n)
	}
	// Every default name is valid, and names do not collide: plain ones
	// are at most 14 bytes and cut ones exactly 15, and cut names sharing
	// their first bytes differ in the hash (25 bits: a few hundred ports
	// with one 7-byte start collide with odds below 1 in 500; Sync refuses
	// a collision anyway).
	seen := map[string]string{}
	check := func(port string) {
		n := DefaultName(port)
		if err := checkName(n); err != nil {
			t.Fatalf("DefaultName(%q) = %q: %v", port, n, err)
		}
		if other, dup := seen[n]; dup {
			t.Fatalf("DefaultName(%q) = DefaultName(%q) = %q", port, other, n)
		}
		seen[n] = port
	}
	for i := range 300 {
		check(fmt.Sprintf("p%d", i))             // plain
		check(fmt.Sprintf("enp0s31f6v%d", i))    // 11-14 bytes
		check(fmt.Sprintf("longportname.%d", i)) // cut
	}
}

func TestCheckName(t *testing.T) {
	for _, bad := range []string{"", ".", "..", "a/b", "a:b", "a b", "a\tb", "0123456789abcdef"} {
		if checkName(bad) == nil {
			t.Errorf("checkName(%q) accepted", bad)
		}
	}
	for _, good := range []string{"nf-eth1", "0123456789abcde", "a.b-c_d@e"} {
		if err := checkName(good); err != nil {
			t.Errorf("checkName(%q): %v", good, err)
		}
	}
}
