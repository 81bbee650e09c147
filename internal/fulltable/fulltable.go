// Package fulltable loads the real full Internet routing table used by the
// benchmarks and large tests: the 901,899 IPv4 prefixes in the bart module's
// testdata (internal/tests/testdata/prefixes.txt.gz, MIT licensed), read from
// the Go module cache, where building netfwd put it.
//
// Locking: Load caches its result behind a sync.Once.
package fulltable

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// BartVersion is the bart module version whose testdata holds the table.
const BartVersion = "v0.30.0"

// Count is the number of IPv4 prefixes in the table.
const Count = 901_899

var (
	once     sync.Once
	prefixes []netip.Prefix
	loadErr  error
)

// Path finds prefixes.txt.gz: $NETFWD_PREFIXES, else the module cache
// ($GOMODCACHE, `go env GOMODCACHE`, $GOPATH/pkg/mod, ~/go/pkg/mod).
func Path() (string, error) {
	if p := os.Getenv("NETFWD_PREFIXES"); p != "" {
		return p, nil
	}
	rel := filepath.Join("github.com", "gaissmai", "bart@"+BartVersion, "internal", "tests", "testdata", "prefixes.txt.gz")
	var roots []string
	if c := os.Getenv("GOMODCACHE"); c != "" {
		roots = append(roots, c)
	}
	if out, err := exec.Command("go", "env", "GOMODCACHE").Output(); err == nil {
		roots = append(roots, strings.TrimSpace(string(out)))
	}
	if gp := os.Getenv("GOPATH"); gp != "" {
		roots = append(roots, filepath.Join(gp, "pkg", "mod"))
	}
	if home, err := os.UserHomeDir(); err == nil {
		roots = append(roots, filepath.Join(home, "go", "pkg", "mod"))
	}
	for _, r := range roots {
		p := filepath.Join(r, rel)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("full table not found: run `go mod download github.com/gaissmai/bart@%s` or set NETFWD_PREFIXES", BartVersion)
}

// Load returns the IPv4 prefixes of the full table in file order.
// The slice is shared: do not modify it.
func Load() ([]netip.Prefix, error) {
	once.Do(func() { prefixes, loadErr = load() })
	return prefixes, loadErr
}

func load() ([]netip.Prefix, error) {
	path, err := Path()
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	out := make([]netip.Prefix, 0, Count)
	sc := bufio.NewScanner(z)
	for sc.Scan() {
		p, err := netip.ParsePrefix(strings.TrimSpace(sc.Text()))
		if err != nil || !p.Addr().Is4() {
			continue
		}
		out = append(out, p.Masked())
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("full table: no IPv4 prefixes in " + path)
	}
	return out, nil
}

// RandomProbes returns n addresses, each a random address inside a random
// prefix of the table (so they hit routes, like real traffic), shuffled.
func RandomProbes(pfx []netip.Prefix, n int, seed uint64) []netip.Addr {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	out := make([]netip.Addr, n)
	for i := range out {
		p := pfx[r.IntN(len(pfx))]
		b := p.Addr().As4()
		v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
		if host := 32 - p.Bits(); host > 0 {
			v |= r.Uint32() & (1<<host - 1)
		}
		out[i] = netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	}
	return out
}
