package bench

import "testing"

// parseGoBench keeps each sub-benchmark's fastest run, drops the
// -GOMAXPROCS suffix and keeps custom metrics by unit.
func TestParseGoBench(t *testing.T) {
	out := []byte(`goos: linux
BenchmarkFDB/impl=fdb/entries=1000/op=lookup-2   	  687114	       182.2 ns/op	         1.232 buckets/lookup	      1000 entries	       0 B/op	       0 allocs/op
BenchmarkFDB/impl=fdb/entries=1000/op=lookup-2   	  687114	       150.5 ns/op	         1.250 buckets/lookup	      1000 entries	       0 B/op	       0 allocs/op
BenchmarkFDB/impl=hash256/entries=1000/op=learn-2	  201231	       524.2 ns/op	      64 B/op	       1 allocs/op
PASS
`)
	res, err := parseGoBench(out)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := res["FDB/impl=fdb/entries=1000/op=lookup"]
	if !ok || r.NsOp != 150.5 || r.Metrics["buckets/lookup"] != 1.25 || r.Metrics["entries"] != 1000 {
		t.Errorf("lookup: %+v (have %v)", r, res)
	}
	if l := res["FDB/impl=hash256/entries=1000/op=learn"]; l.NsOp != 524.2 || l.AllocsOp != 1 {
		t.Errorf("learn: %+v", l)
	}
	if _, err := parseGoBench([]byte("FAIL\n")); err == nil {
		t.Error("no results: want an error")
	}
}
