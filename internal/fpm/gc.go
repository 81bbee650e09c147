package fpm

// Collecting less often during bulk loads. A full table adds a few small
// objects per route that all stay live, so the collector's work while they
// pile up is wasted (as config.LoadFIB found for config files); a bulk
// transaction raises GOGC to 400 until it commits.
//
// Locking: gcMu guards the count of bulk transactions in progress (the FPM
// session and the kernel mirror may overlap); the first sets GOGC, the last
// restores it.

import (
	"runtime/debug"
	"sync"
)

var (
	gcMu    sync.Mutex
	gcUsers int // guarded by gcMu
	gcSaved int // guarded by gcMu
)

// BulkGC raises GOGC for a bulk load; call the returned function when it
// ends.
func BulkGC() func() {
	gcMu.Lock()
	if gcUsers == 0 {
		gcSaved = debug.SetGCPercent(400)
	}
	gcUsers++
	gcMu.Unlock()
	return func() {
		gcMu.Lock()
		gcUsers--
		if gcUsers == 0 {
			debug.SetGCPercent(gcSaved)
		}
		gcMu.Unlock()
	}
}
