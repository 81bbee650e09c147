#!/bin/sh
# Instructions per frame through the engine, counted by callgrind: the
# machine-independent cost figure of docs/benchmarks.md.
#
#   bench/callgrind.sh [CASE...]   CASE: routed (default: compiled FIB),
#                                  routed-trie, bridged-unicast, bridged-flood
#
# It builds the bench package's test binary and runs TestCallgrindPipeline
# (bench/callgrind_test.go: 50,000 routes of the full table, a warm-up, then
# 65,536 frames of 64 bytes, each copied from its template as in `netfwd-bench
# pipeline`) under valgrind. Callgrind dumps its counters on entering
# callgrindStart and callgrindStop; the second dump is the frames' count,
# everything the process ran in between (the scheduler's few instructions
# included), divided by the frames. NETFWD_CALLGRIND_FRAMES changes the frame
# count. Needs valgrind; takes a few minutes per case.
set -eu
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "callgrind.sh: valgrind not found" >&2; exit 1; }
[ $# -gt 0 ] || set -- routed
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go test -c -o "$tmp/bench.test" ./bench
# The table's path, so that the test starts no `go env` child: a child's
# SIGCHLD can trip callgrind's signal bookkeeping.
: "${NETFWD_PREFIXES:=$(go env GOMODCACHE)/github.com/gaissmai/bart@$(sed -n 's/^const BartVersion = "\(.*\)"$/\1/p' internal/fulltable/fulltable.go)/internal/tests/testdata/prefixes.txt.gz}"
export NETFWD_PREFIXES
for c in "$@"; do
	# No GC and no asynchronous preemption while counting: fewer signals
	# and no collector work in the count.
	NETFWD_CALLGRIND=$c GOGC=off GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind \
		--callgrind-out-file="$tmp/out.$c" \
		--dump-before='*bench.callgrindStart' --dump-before='*bench.callgrindStop' \
		"$tmp/bench.test" -test.run '^TestCallgrindPipeline$' >"$tmp/log.$c" 2>&1 ||
		{ cat "$tmp/log.$c" >&2; exit 1; }
	frames=$(sed -n 's/^callgrind-case .* frames \([0-9]*\)$/\1/p' "$tmp/log.$c")
	total=$(grep -l '^desc: Trigger: .*callgrindStop' "$tmp/out.$c"* | xargs sed -n 's/^totals: \([0-9]*\).*/\1/p')
	[ -n "$frames" ] && [ -n "$total" ] || { cat "$tmp/log.$c" >&2; exit 1; }
	awk -v c="$c" -v t="$total" -v f="$frames" \
		'BEGIN { printf "%-16s %7.1f instructions per frame (%d frames, %d instructions)\n", c, t / f, f, t }'
done
