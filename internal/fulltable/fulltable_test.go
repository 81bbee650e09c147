package fulltable

import "testing"

func TestLoad(t *testing.T) {
	p, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(p) != Count {
		t.Fatalf("loaded %d IPv4 prefixes, want %d", len(p), Count)
	}
	probes := RandomProbes(p, 1000, 1)
	for _, a := range probes {
		if !a.Is4() {
			t.Fatalf("probe %v is not IPv4", a)
		}
	}
}
