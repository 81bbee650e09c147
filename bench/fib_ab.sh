#!/usr/bin/env bash
# fib_ab.sh OLD NEW OUTDIR [ROUNDS]: the lookups of `netfwd-bench fib` of
# two builds, before (OLD) and after (NEW), run alternately (OLD NEW OLD
# NEW ..., ROUNDS pairs, default 3) on the same machine, each run's JSON in
# OUTDIR/{old,new}-N.json; then, per lookup case, the ratio new/old of each
# pair (min, median, max) and of the pairs' best runs. The suite's own
# baselines (bart raw, split) are in both runs: a ratio away from 1 there is
# the machine drifting between runs, or the code's alignment in the
# binary, not the change. The last column divides each pair's ratio by the
# same pair's ratio for the unchanged code the case builds on (the bare
# bart trie of its kind; the compiled table alone for compiled-nexthop and
# compiled-batch): the change's own share.
# FIB_AB_ANALYSE=1 skips the runs and analyses OUTDIR's files.
#
# NEW runs with --only naming the old suite's lookups, so that its rounds
# hold the same cases as OLD's (suite fib leaves its rules cases out then).
# Build OLD from a checkout of the earlier commit:
#   git archive 32d3b85 | tar -x -C /tmp/old && (cd /tmp/old && go build -o /tmp/netfwd-bench-old ./cmd/netfwd-bench)
# FIB_AB_FLAGS adds flags to both runs (--quick: a smoke test). Needs jq.
set -euo pipefail
old=$1 new=$2 out=$3 rounds=${4:-3}
mkdir -p "$out"
flags=(${FIB_AB_FLAGS:-})
only=bart-fast-raw,bart-table-raw,split,merged,compiled,compiled-nexthop,compiled-batch
for i in $(seq 1 "$rounds"); do
	[ -n "${FIB_AB_ANALYSE:-}" ] && break
	echo "pair $i: old ($(uptime | sed 's/.*load/load/'))" >&2
	"$old" fib --json "${flags[@]}" >"$out/old-$i.json"
	echo "pair $i: new ($(uptime | sed 's/.*load/load/'))" >&2
	"$new" fib --json "${flags[@]}" --only "$only" >"$out/new-$i.json"
done
# One row per lookup case (impl/probe[/trie]): ns of each run, ratios.
{
	for i in $(seq 1 "$rounds"); do
		jq -c --arg side old --argjson i "$i" '.[] | select(.params.probe) | {side: $side, i: $i, key: (.impl + "/" + .params.probe + (if .params.trie then "/" + .params.trie else "" end)), ns: .ns_op}' "$out/old-$i.json"
		jq -c --arg side new --argjson i "$i" '.[] | select(.params.probe) | {side: $side, i: $i, key: (.impl + "/" + .params.probe + (if .params.trie then "/" + .params.trie else "" end)), ns: .ns_op}' "$out/new-$i.json"
	done
} | jq -rs '
	def med: sort | .[(length / 2 | floor)];
	def r3: . * 1000 | round / 1000;
	# The unchanged code each case is normalised by, in the same run: the
	# bare bart trie of its kind, or the compiled table alone.
	def ref: (split("/")) as $p
		| if ($p[0] | startswith("compiled")) then "compiled/" + $p[1]
		  elif ($p | length) == 3 then "bart-" + $p[2] + "-raw/" + $p[1]
		  else null end;
	(map({key: "\(.side)-\(.i)-\(.key)", value: .ns}) | from_entries) as $ns
	| group_by(.key)[] as $g
	| $g[0].key as $k
	| ($g | map(select(.side == "old")) | sort_by(.i) | map(.ns)) as $o
	| ($g | map(select(.side == "new")) | sort_by(.i) | map(.ns)) as $n
	| select(($o | length) > 0 and ($n | length) == ($o | length))
	| ([range(0; $o | length)] | map($n[.] / $o[.])) as $r
	| ($k | ref) as $ref
	| (if $ref == null or $ref == $k then "" else
		[range(1; ($o | length) + 1) | (($ns["new-\(.)-\($k)"] / $ns["new-\(.)-\($ref)"]) / ($ns["old-\(.)-\($k)"] / $ns["old-\(.)-\($ref)"]))]
		| "\(min | r3) \(med | r3) \(max | r3)" end) as $norm
	| [$k, ($o | map(. * 100 | round / 100) | join(" ")), ($n | map(. * 100 | round / 100) | join(" ")),
	   ($r | min | r3), ($r | med | r3), ($r | max | r3), (($n | min) / ($o | min) | r3), $norm]
	| @tsv' | sort | { echo -e "case\told ns (runs)\tnew ns (runs)\tratio min\tratio median\tratio max\tbest new/best old\tnormalised min med max"; cat; } | column -t -s $'\t'
