package bench

import "runtime/debug"

// goamd64 reports the GOAMD64 level the running binary was compiled for
// (v1 unless built with GOAMD64=v3; bart is faster at v3).
func goamd64() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "GOAMD64" {
				return s.Value
			}
		}
	}
	return "v1"
}
