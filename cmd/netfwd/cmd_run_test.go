package main

import (
	"testing"

	"github.com/netfwd/netfwd/internal/hostpath"
)

func TestParsePuntLimit(t *testing.T) {
	for _, c := range []struct {
		in    string
		class hostpath.Class
		want  hostpath.Limit
		err   bool
	}{
		{in: "other=2000/200", class: hostpath.ClassOther, want: hostpath.Limit{Rate: 2000, Burst: 200}},
		{in: "routing=500", class: hostpath.ClassRouting, want: hostpath.Limit{Rate: 500, Burst: 100}},
		{in: "neigh=2", class: hostpath.ClassNeigh, want: hostpath.Limit{Rate: 2, Burst: 1}},
		{in: "bgp=100", err: true},
		{in: "other", err: true},
		{in: "other=-5", err: true},
		{in: "other=NaN", err: true},
		{in: "other=10/0", err: true},
		{in: "other=10/x", err: true},
	} {
		var l hostpath.Limits
		err := parsePuntLimit(&l, c.in)
		if (err != nil) != c.err {
			t.Errorf("%q: err %v, want error %v", c.in, err, c.err)
			continue
		}
		if err == nil && l[c.class] != c.want {
			t.Errorf("%q: %v, want %v", c.in, l[c.class], c.want)
		}
	}
}
