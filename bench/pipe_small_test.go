package bench

import (
	"testing"

	"github.com/netfwd/netfwd/internal/fulltable"
)

func BenchmarkPipeRoutedCompiled(b *testing.B) {
	all, _ := fulltable.Load()
	dsts := fulltable.RandomProbes(all, 1<<16, 7)
	c, err := NewRoutedCase(all, dsts, true)
	if err != nil {
		b.Fatal(err)
	}
	body := c.Body()
	b.ResetTimer()
	body(b.N)
}

func BenchmarkPipeBridged(b *testing.B) {
	c, err := NewBridgedUnicastCase()
	if err != nil {
		b.Fatal(err)
	}
	body := c.Body()
	b.ResetTimer()
	body(b.N)
}
