// Package dir24 is a DIR-24-8 longest-prefix-match table for IPv4: a
// 2^24-entry first-level array indexed by the top 24 bits of the address and
// 256-entry groups for the /24s that hold longer prefixes, so that most
// lookups are one memory read. Values are 24-bit integers (0..MaxValue; the
// FIB stores nexthop indices, 0 meaning "no route").
//
// Readers (Lookup, LookupAddr, LookupBatch) take no locks and never allocate;
// each answer is a value the address had at some moment during the call.
// One writer at a time changes the table incrementally with Set and Delete,
// or Build makes a new table from a whole prefix set. The table uses 64 MiB
// plus 1 KiB per group.
//
// docs/fib-compiled.md has the design and the measurements.
package dir24
