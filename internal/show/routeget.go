package show

// `route get` answers, shared by `netfwd route get` and the control socket:
// the design notes' JSON object (-j) or an `ip route get` style line, and
// the exit status `ip route get` would give for it (non-zero when the
// lookup fails: scripts tell the cases apart by it).
//
// Locking: lock-free (FIB lookups).

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/nexthop"
	"github.com/netfwd/netfwd/wire"
)

// maxEcho bounds the bad input an answer repeats.
const maxEcho = 64

// A fast/slow path difference is read again settleTries times, settleWait
// apart, before it is reported: a commit takes microseconds, so 100 ms
// without agreement is not a commit in flight.
const (
	settleTries = 20
	settleWait  = 5 * time.Millisecond
)

// Exit statuses of `route get`, as `ip route get` exits: 1 for an address
// that does not parse (iproute2's get_prefix), 2 when the kernel refuses
// the lookup ("RTNETLINK answers: ..."): no route (ENETUNREACH) and the
// routes that drop, blackhole (EINVAL), unreachable (EHOSTUNREACH) and
// prohibit (EACCES). The answer is printed all the same.
const (
	StatusInvalid = 1
	StatusFailed  = 2
)

// Failed is the error of a query whose answer is a failure (written
// already): a script reads Status as the command's exit status.
type Failed struct {
	Query  string
	Status int
}

func (f *Failed) Error() string { return fmt.Sprintf("%s failed (status %d)", f.Query, f.Status) }

// AppendRouteGet formats one `route get` answer: the design notes' JSON object, or an
// `ip route get` style line.
func AppendRouteGet(b []byte, f *fib.FIB, s string, asJSON bool) []byte {
	b, _ = RouteGet(b, f, s, asJSON)
	return b
}

// RouteGet is AppendRouteGet with the answer's exit status (0, StatusInvalid
// or StatusFailed). s is an address, or the arguments of a `route get`
// line (`8.8.8.8 from 10.1.1.1 iif eth0 mark 5`): `netfwd route get`'s
// input lines may carry the flow's selectors.
func RouteGet(b []byte, f *fib.FIB, s string, asJSON bool) ([]byte, int) {
	q := config.RouteGet{Dst: s}
	if strings.ContainsAny(s, " \t") {
		c, _, err := config.ParseLine(config.Pos{File: "route get", Line: 1}, "route get "+s)
		rq, ok := c.Query.(config.RouteGet)
		if err != nil || !ok {
			if err == nil {
				err = fmt.Errorf("not a route get query")
			}
			return appendGetError(b, s, err.Error(), asJSON), StatusInvalid
		}
		q = rq
	}
	return appendRouteGet(b, f, q, asJSON)
}

// appendGetError answers a query that is not one, echoing a short prefix
// of it.
func appendGetError(b []byte, s, msg string, asJSON bool) []byte {
	if len(s) > maxEcho {
		s = s[:maxEcho] + "..."
	}
	if asJSON {
		b = append(b, `{"dst":`...)
		b = strconv.AppendQuote(b, s)
		b = append(b, `,"error":`...)
		b = strconv.AppendQuote(b, msg)
		return append(b, "}\n"...)
	}
	return append(b, s+": "+msg+"\n"...)
}

// appendRouteGet answers a `route get` query with its flow (from, iif,
// oif, mark, tos, ipproto, sport, dport: what the rule walk selects on),
// and its exit status: oif restricts the lookup to routes through that
// device; from, mark and iif are echoed as iproute2 prints the kernel's
// answer (`ADDR from A via G dev D mark M iif I`, no src: the kernel
// prints none for an input route or a given source; tos, ipproto and
// ports it does not echo). A rule's blackhole or prohibit answers with its
// type and no route; a rule's unreachable as no route does.
func appendRouteGet(b []byte, f *fib.FIB, q config.RouteGet, asJSON bool) ([]byte, int) {
	s := q.Dst
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() {
		if len(s) > maxEcho { // an answer echoes at most a short prefix of bad input
			s = s[:maxEcho] + "..."
		}
		if asJSON {
			b = append(b, `{"dst":`...)
			b = strconv.AppendQuote(b, s)
			return append(b, `,"error":"invalid IPv4 address"}`+"\n"...), StatusInvalid
		}
		return append(b, fmt.Sprintf("%s: invalid IPv4 address\n", s)...), StatusInvalid
	}
	// The datapath's answer (the merged trie) and the per-table tries'
	// must agree. They are two reads: a commit between them (a link going
	// down withdraws routes) or a compiled table still catching up with
	// the commit it follows may make them differ for a moment, so a
	// difference is read again; one that lasts is a bug, never papered
	// over.
	var nh *nexthop.Nexthop
	var res fib.Result
	var ok bool
	fq := fib.FlowQuery{Dst: a, Src: q.From, IIF: q.IIf, OIF: q.OIf, Mark: q.Mark, TOS: q.TOS, Proto: q.IPProto,
		SPort: q.SPort, DPort: q.DPort, VRF: q.VRF}
	fast, check := fastLookup(f, fq)
	disagree := func() bool {
		return check && (ok != (nh != nil) || ok && res.Route.NH != nh && res.Route.Type != fib.Throw)
	}
	for try := 0; ; try++ {
		nh = fast()
		res, ok = f.LookupRouteFlow(fq)
		if !disagree() || try == settleTries {
			break
		}
		time.Sleep(settleWait)
	}
	if disagree() {
		msg := fmt.Sprintf("internal error: fast path %v, slow path %v", nh, res.Route)
		if asJSON {
			b = append(b, `{"dst":`...)
			b = strconv.AppendQuote(b, s)
			b = append(b, `,"error":`...)
			b = strconv.AppendQuote(b, msg)
			return append(b, "}\n"...), StatusInvalid
		}
		return append(b, s+": "+msg+"\n"...), StatusInvalid
	}
	if !ok {
		if asJSON {
			return append(b, `{"dst":"`+a.String()+`","error":"network unreachable"}`+"\n"...), StatusFailed
		}
		return append(b, a.String()+": network unreachable\n"...), StatusFailed
	}
	if !res.Route.Prefix.IsValid() { // a rule's blackhole or prohibit decided
		return appendRuleAnswer(b, a, res.Route.Type.String(), q, asJSON), StatusFailed
	}
	r := res.Route
	typ := r.Type.String()
	if res.NH != nil && r.Type == fib.Unicast && res.NH.Kind.String() != "unicast" {
		typ = res.NH.Kind.String() // a route through a blackhole nexthop object
	}
	var gw, dev string
	if res.NH != nil {
		if res.NH.UsesGateway() {
			gw = res.NH.Gateway.String()
		}
		dev = res.NH.Dev
	}
	status := 0
	switch typ {
	case "blackhole", "unreachable", "prohibit":
		status = StatusFailed // the kernel refuses these lookups
	}
	src := ""
	if res.Prefsrc.IsValid() && !q.From.IsValid() && q.IIf == "" {
		src = res.Prefsrc.String()
	}
	from := ""
	if q.From.IsValid() {
		from = q.From.String()
	}
	if asJSON {
		b = append(b, `{"dst":"`+a.String()+`","type":"`+typ+`","table":"`+fib.TableName(r.Table)+`","prefix":"`+r.Prefix.String()+`"`...)
		if gw != "" {
			b = append(b, `,"gateway":"`+gw+`"`...)
		}
		if dev != "" {
			b = append(b, `,"dev":`...)
			b = strconv.AppendQuote(b, dev)
		}
		if src != "" {
			b = append(b, `,"prefsrc":"`+src+`"`...)
		}
		b = append(b, `,"metric":`...)
		b = strconv.AppendUint(b, uint64(r.Metric), 10)
		return appendFlowJSON(b, q), status
	}
	if typ != "unicast" {
		b = append(b, typ+" "...)
	}
	b = append(b, a.String()...)
	if from != "" {
		b = append(b, " from "+from...)
	}
	if gw != "" {
		b = append(b, " via "+gw...)
	}
	if dev != "" {
		b = append(b, " dev "+dev...)
	}
	if r.Table != fib.TableMain {
		b = append(b, " table "+fib.TableName(r.Table)...)
	}
	if src != "" {
		b = append(b, " src "+src...)
	}
	if r.Metric != 0 {
		b = append(b, " metric "+strconv.FormatUint(uint64(r.Metric), 10)...)
	}
	return appendFlowText(b, q), status
}

// fastLookup returns the datapath's lookup of the query's flow, and
// whether its answer must agree with LookupRouteFlow's: with Linux's
// default rules the merged lookup of the destination (selectors choose
// nothing then); with custom rules the rule walk of an output flow (no
// iif or vrf: a VRF changes the flow LookupRouteFlow builds). oif restricts
// only the slow lookup, so it is never compared.
func fastLookup(f *fib.FIB, q fib.FlowQuery) (lookup func() *nexthop.Nexthop, check bool) {
	if !f.HasCustomRules() {
		return func() *nexthop.Nexthop { return f.Lookup(q.Dst) }, q.OIF == "" && q.VRF == ""
	}
	k := fib.Flow{Dst: wire.Addr4From(q.Dst), IIF: 1, Mark: q.Mark, TOS: q.TOS, Proto: q.Proto, SPort: q.SPort, DPort: q.DPort}
	if q.Src.Is4() {
		k.Src = wire.Addr4From(q.Src)
	}
	return func() *nexthop.Nexthop { return f.LookupFlow(&k) }, q.OIF == "" && q.IIF == "" && q.VRF == ""
}

// appendRuleAnswer is the answer when a rule's action decided (blackhole,
// prohibit): the type, no route (prefix, table, metric).
func appendRuleAnswer(b []byte, a netip.Addr, typ string, q config.RouteGet, asJSON bool) []byte {
	if asJSON {
		b = append(b, `{"dst":"`+a.String()+`","type":"`+typ+`"`...)
		return appendFlowJSON(b, q)
	}
	b = append(b, typ+" "+a.String()...)
	if q.From.IsValid() {
		b = append(b, " from "+q.From.String()...)
	}
	return appendFlowText(b, q)
}

// appendFlowJSON ends a JSON answer with the query's from, mark and iif.
func appendFlowJSON(b []byte, q config.RouteGet) []byte {
	if q.From.IsValid() {
		b = append(b, `,"from":"`+q.From.String()+`"`...)
	}
	if q.Mark != 0 {
		b = append(b, `,"mark":`...)
		b = strconv.AppendUint(b, uint64(q.Mark), 10)
	}
	if q.IIf != "" {
		b = append(b, `,"iif":`...)
		b = strconv.AppendQuote(b, q.IIf)
	}
	return append(b, "}\n"...)
}

// appendFlowText ends a text answer as iproute2 prints the flow the
// kernel echoes: `mark M` (hex from 16 on), `iif D`.
func appendFlowText(b []byte, q config.RouteGet) []byte {
	switch {
	case q.Mark >= 16:
		b = append(b, " mark 0x"+strconv.FormatUint(uint64(q.Mark), 16)...)
	case q.Mark != 0:
		b = append(b, " mark "+strconv.FormatUint(uint64(q.Mark), 10)...)
	}
	if q.IIf != "" {
		b = append(b, " iif "+q.IIf...)
	}
	return append(b, '\n')
}
