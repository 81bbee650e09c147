package fib

// Route ownership: which source installed a route. The configuration (the
// config file, `netfwd ctl` lines and the routes derived from addresses)
// and each routing source (FRR over FPM, the kernel mirror) manage only
// their own routes: an add, replace, change or delete from one owner never
// touches another owner's route, even at the same table, prefix and
// metric. Such routes sit side by side in the prefix's list, ordered by
// metric; at equal metric the configuration's routes come first (and so
// decide lookups), learned ones after them in the order they arrived, like
// `ip route append`.
//
// Mark is a learned route's generation, for mark-and-sweep resyncs
// (learned.go): the source stamps every route it (re)installs with its
// current mark and later sweeps its routes that still carry an older one.

import "fmt"

// Owner is the source that installed a route or address.
type Owner uint8

const (
	// OwnerConfig is the configuration: config file, ctl lines, addresses.
	OwnerConfig Owner = iota
	// OwnerFPM is FRR's zebra over the FPM connection.
	OwnerFPM
	// OwnerKernel is the kernel mirror (routes any daemon put in the
	// kernel of netfwd's namespace).
	OwnerKernel
)

var ownerNames = [...]string{"config", "fpm", "kernel"}

func (o Owner) String() string {
	if int(o) < len(ownerNames) {
		return ownerNames[o]
	}
	return fmt.Sprintf("owner(%d)", o)
}

// rank orders routes of equal metric: the configuration first.
func (o Owner) rank() int {
	if o == OwnerConfig {
		return 0
	}
	return 1
}

// ownedError says that the only routes a delete would have matched belong
// to another owner. It matches ErrNoRoute (errors.Is): from the caller's
// point of view there is no such route.
type ownedError struct {
	Route *Route
}

func (e *ownedError) Error() string {
	dst := e.Route.Prefix.String()
	if e.Route.Prefix.Bits() == 0 {
		dst = "default"
	}
	return fmt.Sprintf("no such process: %s (proto %s) is a route learned from %s, not configured",
		dst, e.Route.Proto, e.Route.Owner)
}

// Is makes errors.Is(err, ErrNoRoute) true.
func (e *ownedError) Is(target error) bool { return target == ErrNoRoute }
