package config

// Keywords: the one abbreviation rule of every line netfwd reads, iproute2's.
//
// iproute2 compares each word of a command line with its keywords in the
// order its C source lists them, with one of two functions: matches(word,
// keyword), true when word is a non-empty prefix of keyword, or strcmp, an
// exact comparison. The first keyword that the word names wins: `ip r` is
// `ip route` because "route" comes before "rule" in ip's object table, and
// `route add ... t 5` sets the table because "tos" is compared exactly while
// "table" is abbreviable. A table here lists iproute2's keywords in
// iproute2's order, each marked abbreviable or exact, including those netfwd
// does not implement: their abbreviations must not fall through to a later
// keyword that netfwd happens to know. netfwd's own keywords (the `bridge`
// object in ip lines, `fdb`, `vlan`, `reload`, ...) come after iproute2's, so
// they never change what an iproute2 abbreviation means.
//
// Locking: none (read-only tables).

import (
	"fmt"
	"strings"
)

// keyword is one entry of a keyword table.
type keyword struct {
	word  string // as iproute2 spells it
	means string // what netfwd does with it ("" = iproute2 knows it, netfwd does not)
	exact bool   // strcmp in iproute2: no abbreviation
}

// kw is an abbreviable keyword (iproute2's matches()); means defaults to
// the word itself.
func kw(word string, means ...string) keyword {
	k := keyword{word: word, means: word}
	if len(means) > 0 {
		k.means = means[0]
	}
	return k
}

// exact is a keyword iproute2 compares with strcmp.
func exact(word string, means ...string) keyword {
	k := kw(word, means...)
	k.exact = true
	return k
}

// unsupported marks keywords netfwd does not implement, keeping their place
// in the table (and their abbreviations).
func unsupported(ks ...keyword) []keyword {
	for i := range ks {
		ks[i].means = ""
	}
	return ks
}

// keywords is one of iproute2's keyword tables, in iproute2's order.
type keywords struct {
	what  string // for messages: "object", "route command", ...
	table []keyword
	// byFirst lists the entries by their first byte, in table order: a
	// word can only name a keyword that starts as it does (a prefix, a
	// route's destination, skips the table at once).
	byFirst [256][]int
}

func table(what string, parts ...any) *keywords {
	t := &keywords{what: what}
	for _, p := range parts {
		switch v := p.(type) {
		case keyword:
			t.table = append(t.table, v)
		case []keyword:
			t.table = append(t.table, v...)
		default:
			panic(fmt.Sprintf("config: bad keyword table entry %T", p))
		}
	}
	for i, k := range t.table {
		t.byFirst[k.word[0]] = append(t.byFirst[k.word[0]], i)
	}
	allTables = append(allTables, t)
	return t
}

// allTables lists every table (TestKeywordIndex checks each).
var allTables []*keywords

// matches is iproute2's matches(): word is a non-empty prefix of keyword.
func matches(word, keyword string) bool {
	return word != "" && len(word) <= len(keyword) && keyword[:len(word)] == word
}

// find returns the first keyword of the table that word names.
func (t *keywords) find(word string) (keyword, bool) {
	if word == "" {
		return keyword{}, false
	}
	for _, i := range t.byFirst[word[0]] {
		if k := t.table[i]; word == k.word || !k.exact && matches(word, k.word) {
			return k, true
		}
	}
	return keyword{}, false
}

// lookup resolves word to what netfwd does with it. ok is false when no
// keyword of the table is named (the word may then be a value, such as a
// prefix or a device name); err is set when the keyword is iproute2's but
// not netfwd's.
func (t *keywords) lookup(word string) (means string, ok bool, err error) {
	k, ok := t.find(word)
	if !ok {
		return "", false, nil
	}
	if k.means == "" {
		return "", true, errUnsupported(t.what, word, k.word)
	}
	return k.means, true, nil
}

// must resolves a word that has to be one of the table's keywords, as the
// control socket reads it (queries offered).
func (t *keywords) must(word string) (string, error) { return t.mustIn(word, false) }

// mustIn is must in a context: in a config file (cfg) the words a message
// offers are only those that configure; queries are parsed the same (the
// applier refuses them, naming the query) but never suggested.
func (t *keywords) mustIn(word string, cfg bool) (string, error) {
	means, ok, err := t.lookup(word)
	if err != nil {
		return "", err
	}
	if !ok {
		if s := suggest(word, cfg, t); s != "" {
			return "", fmt.Errorf("unknown %s %s (did you mean %s?)", t.what, Quote(word), Quote(s))
		}
		return "", fmt.Errorf("unknown %s %s (want %s)", t.what, Quote(word), t.supported(cfg))
	}
	return means, nil
}

// queryMeanings are the meanings that ask instead of change. They are
// offered where queries are answered (the control socket, `netfwd route`)
// and never by the config file reader.
var queryMeanings = map[string]bool{"show": true, "get": true, "stats": true, "reload": true,
	"flush": true, "monitor": true, "help": true, "capture": true, "trace": true,
	"vrfs": true} // the `vrf` object: only `vrf show` (`link ... vrf NAME` is configuration)

// offered reports whether a message in context cfg may offer k.
func (k keyword) offered(cfg bool) bool {
	return k.means != "" && !(cfg && queryMeanings[k.means])
}

// supported lists what a word of the table may be, for messages: the first
// spelling of each meaning netfwd implements (`list` for show, `fdb` for
// the bridge's fdb), each one a word the reader accepts.
func (t *keywords) supported(cfg bool) string {
	var out []string
	seen := map[string]bool{}
	for _, k := range t.table {
		if k.offered(cfg) && !seen[k.means] {
			seen[k.means] = true
			out = append(out, k.word)
		}
	}
	return strings.Join(out, ", ")
}

func errUnsupported(what, word, keyword string) error {
	if word != keyword {
		return fmt.Errorf("%s %s (%s) is not supported by netfwd", what, Quote(word), keyword)
	}
	return fmt.Errorf("%s %s is not supported by netfwd", what, Quote(word))
}

// ---- the command line of a line: `ip [OPTIONS] OBJECT ...` ----

// ipObjects is ip.c's cmds[] table, then netfwd's own objects.
var ipObjects = table("object",
	kw("address"), unsupported(kw("addrlabel"), kw("maddress")), kw("route"),
	kw("rule"), kw("neighbor", "neigh"), kw("neighbour", "neigh"),
	unsupported(kw("ntable"), kw("ntbl")), kw("link"),
	unsupported(kw("l2tp"), kw("fou"), kw("ila"), kw("macsec"), kw("tunnel"), kw("tunl"), kw("tuntap"),
		kw("tap"), kw("token"), kw("tcpmetrics"), kw("tcp_metrics")), kw("monitor"), unsupported(kw("xfrm"), kw("mroute"),
		kw("mrule"), kw("netns"), kw("netconf")), kw("vrf", "vrfs"), unsupported(kw("sr")),
	kw("nexthop"), unsupported(kw("mptcp"), kw("ioam")), kw("help"), kw("stats"),
	// netfwd: `bridge ...` lines, the control socket's shorthands.
	kw("bridge"), exact("nh", "nexthop"), kw("fdb", "bridge-fdb"), kw("vlan", "bridge-vlan"), kw("reload"),
	kw("capture"), kw("trace"),
)

// ipOptions is ip.c's option chain (main()), in its order.
var ipOptions = table("option",
	unsupported(kw("-loops"), kw("-family")), exact("-4"), exact("-6", "-6"),
	unsupported(exact("-0"), exact("-M"), exact("-B"), kw("-human"), kw("-human-readable"), kw("-iec")),
	kw("-stats"), kw("-statistics", "-stats"), unsupported(kw("-details"), kw("-resolve"),
		kw("-oneline"), kw("-timestamp"), kw("-tshort"), kw("-Version"), kw("-force"), kw("-batch")), kw("-brief"),
	kw("-json"), unsupported(kw("-pretty"), kw("-rcvbuf"), kw("-color"), kw("-help"), kw("-netns"),
		kw("-Numeric"), kw("-all"), exact("-echo")),
)

// bridgeObjects is bridge.c's cmds[] table.
var bridgeObjects = table("bridge object",
	kw("link"), kw("fdb"), kw("mdb"), unsupported(kw("mst")), kw("vlan"),
	unsupported(kw("vni")), kw("monitor"), kw("help"),
)

// monitorObjects is ipmonitor.c's argument chain, then netfwd's fdb (the
// bridge's, as `bridge monitor fdb`).
var monitorObjects = table("monitor object",
	unsupported(kw("file"), exact("label"), exact("all-nsid")), kw("link"), unsupported(kw("address")),
	kw("route"), unsupported(kw("mroute"), kw("prefix")), kw("neigh"), unsupported(kw("netconf"), kw("rule"),
		kw("nsid"), kw("nexthop"), exact("stats")), exact("all"), kw("help"), unsupported(exact("dev")),
	kw("fdb"),
)

// bridgeMonitorObjects is bridge/monitor.c's chain.
var bridgeMonitorObjects = table("bridge monitor object",
	kw("link"), kw("fdb"), unsupported(kw("mdb"), kw("vlan"), kw("vni")), kw("all"), kw("help"),
)

// bridgeOptions is bridge.c's option chain.
var bridgeOptions = table("bridge option",
	unsupported(kw("-help"), kw("-Version"), kw("-stats"), kw("-statistics"), kw("-details"), kw("-oneline"),
		kw("-timestamp"), kw("-family")), exact("-4"), exact("-6", "-6"),
	unsupported(kw("-netns"), kw("-color")), kw("-compressvlans"), unsupported(kw("-force")), kw("-json"),
	unsupported(kw("-pretty"), kw("-batch")),
)

// onOff reads iproute2's on|off values (parse_on_off: strcmp).
func onOff(key, v string) (bool, error) {
	switch v {
	case "on":
		return true, nil
	case "off":
		return false, nil
	}
	return false, fmt.Errorf("%s: want on or off, got %s", key, Quote(v))
}
