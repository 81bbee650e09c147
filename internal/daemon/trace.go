package daemon

// Packet trace: `netfwd ctl trace [port P] [count N] [filter EXPR]` follows
// the next N frames received (on port P, matching the tcpdump expression)
// through the datapath and prints every decision each one met, as VPP's
// `trace add` does.
//
// How: a traced frame is worked alone. The worker cuts its batch around
// it (the frames before it as one batch, then it, then the rest: order
// kept), runs it through the very same engine calls as any frame, and
// before the flush reads what the engine counted for it (l2.Tx.Pending,
// l3.Worker.Pending: drops by reason, floods, host delivery, forwarded,
// queued for ARP, punted, ICMP sent) and, at the flush, every frame it
// produced (port, VLAN, bytes; frames the router generated on its
// account: ARP requests, ICMP errors). That is what the frame did. The
// decisions are explained beside it from the state the engine used, read
// around the processing: the VLAN it was classified into and the FDB entry
// of its destination, the router interface, the FIB route (table, prefix,
// type, nexthop id) and the group member its flow hash picks (the
// forwarding path's own flow key and hash), the neighbour entry before and
// after, TTL and the egress MTU, the host path's class. The FIB version
// is read before and after: a route change in between is said.
//
// Cost: off, one atomic load per received batch (d.trace); on, only the
// frames the trace takes pay (the filter runs on each frame of a traced
// port while the trace has frames left to take).
//
// Locking: d.trace is an atomic pointer; a session's budget is an atomic
// and its records a channel with room for all of them (workers never
// block); a worker's trace scratch belongs to it.

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/internal/hostpath"
	"github.com/netfwd/netfwd/l2"
	"github.com/netfwd/netfwd/l3"
	"github.com/netfwd/netfwd/nexthop"
	"github.com/netfwd/netfwd/wire"
	"golang.org/x/net/bpf"
)

// traceSession is one running trace.
type traceSession struct {
	port    string // "": every port
	filter  *bpf.VM
	limit   int64
	claimed atomic.Int64
	seq     atomic.Uint64
	records chan *traceRecord // room for limit records
}

// takes reports whether the session wants frame f received on p, and
// claims one of its frames if so.
func (s *traceSession) takes(p *port, f []byte) bool {
	if s.port != "" && p.name != s.port {
		return false
	}
	if s.claimed.Load() >= s.limit {
		return false
	}
	if s.filter != nil {
		if n, err := s.filter.Run(f); err != nil || n == 0 {
			return false
		}
	}
	return s.claimed.Add(1) <= s.limit
}

// traceRecord is one traced frame: what it was, each decision, what left.
type traceRecord struct {
	Seq     uint64          `json:"seq"`
	Time    time.Time       `json:"time"`
	Port    string          `json:"port"`
	Worker  int             `json:"worker"`
	Len     int             `json:"len"`
	Frame   string          `json:"frame"`
	Steps   []traceStep     `json:"steps"`
	Outputs []traceOutput   `json:"outputs"`
	Result  string          `json:"result"`
	Counts  json.RawMessage `json:"counts"`
}

// traceStep is one decision.
type traceStep struct {
	Step   string `json:"step"`
	Detail string `json:"detail"`
}

// traceOutput is a frame the traced frame produced.
type traceOutput struct {
	Port      string `json:"port"`
	VLAN      uint16 `json:"vlan,omitempty"` // the 802.1Q tag it leaves with (0: untagged)
	Len       int    `json:"len"`
	Frame     string `json:"frame"`
	Generated bool   `json:"generated,omitempty"` // made by the router on the frame's account (ARP, ICMP), not the frame itself
}

// traceHeaderBytes of a traced frame are kept as it arrived (headers and
// the start of an ICMP error's quote).
const traceHeaderBytes = 256

// workerTrace is a worker's scratch while it works a traced frame.
type workerTrace struct {
	orig   []byte // the frame's first traceHeaderBytes as received
	outs   []traceOutput
	names  func(id l2.PortID) string
	sendFn func(*l2.Port, [][]byte, []int32)
}

// tracedBatch works a batch while a trace runs: the frames it takes alone,
// the others in runs between them.
func (iw *ioWorker) tracedBatch(p *port, n int, s *traceSession) {
	start := 0
	for i := 0; i < n; i++ {
		if !s.takes(p, iw.frames[i]) {
			continue
		}
		if start < i {
			iw.batchRange(p, start, i)
		}
		iw.traceOne(p, i, s)
		start = i + 1
	}
	if start < n {
		iw.batchRange(p, start, n)
	}
}

// traceOne works frame i of the batch alone and records it.
func (iw *ioWorker) traceOne(p *port, i int, s *traceSession) {
	f := iw.frames[i]
	rec := &traceRecord{Seq: s.seq.Add(1), Time: time.Now(), Port: p.name, Worker: iw.idx, Len: len(f), Frame: describeFrame(f)}
	ex := iw.d.explainIngress(p, f)
	ver := iw.d.e.FIB().Version()
	// The engine rewrites a forwarded frame in place (TTL, MACs): the
	// router's decisions are explained from the frame as it arrived.
	iw.tr.orig = append(iw.tr.orig[:0], f[:min(len(f), traceHeaderBytes)]...)
	iw.receive(p, i, i+1)
	c2, c3 := iw.w.Tx().Pending(), iw.w.Pending()
	host := len(iw.w.Tx().Host) > 0
	var hostVID uint16
	var hostUntagged bool
	if host {
		hostVID, hostUntagged = iw.w.Tx().Host[0].VID, iw.w.Tx().Host[0].Untagged
	}
	iw.tr.outs = iw.tr.outs[:0]
	if iw.tr.sendFn == nil {
		iw.tr.sendFn = iw.traceSend
	}
	iw.w.FlushOrigins(iw.tr.sendFn)
	iw.cur = nil
	rec.Outputs = append([]traceOutput(nil), iw.tr.outs...)
	routed := p.l2.Bridge() == nil || host
	rec.Steps = ex.steps
	if routed {
		rec.Steps = append(rec.Steps, iw.d.explainRouter(p, iw.tr.orig, ex, hostVID, hostUntagged, c3, rec.Outputs)...)
	}
	if v := iw.d.e.FIB().Version(); v != ver {
		rec.Steps = append(rec.Steps, traceStep{"fib", fmt.Sprintf("the FIB changed while the frame was worked (version %d -> %d)", ver, v)})
	}
	rec.Result = traceResult(c2, c3, rec.Outputs, p.l2.Bridge() != nil, host)
	rec.Counts, _ = json.Marshal(struct {
		Bridge l2.PendingCounts `json:"bridge"`
		Router l3.PendingCounts `json:"router"`
	}{c2, c3})
	select {
	case s.records <- rec:
	default: // cannot happen: room for every record the budget allows
	}
}

// traceSend records the traced frame's outputs and sends them.
func (iw *ioWorker) traceSend(lp *l2.Port, frames [][]byte, origins []int32) {
	name := ""
	if dp := iw.d.ports.Load().get(lp.ID); dp != nil {
		name = dp.name
	}
	for k, f := range frames {
		o := traceOutput{Port: name, Len: len(f), Frame: describeFrame(f), Generated: k < len(origins) && origins[k] < 0}
		if len(f) >= 18 && binary.BigEndian.Uint16(f[12:]) == 0x8100 {
			o.VLAN = binary.BigEndian.Uint16(f[14:]) & 0x0fff
		}
		iw.tr.outs = append(iw.tr.outs, o)
	}
	iw.send(lp, frames, origins)
}

// ingressExplained is what the ingress side decided, for the router step.
type ingressExplained struct {
	steps []traceStep
	l3off int // offset of the IPv4 header (routed ports: after any tag)
}

// explainIngress explains the port and bridge decisions for frame f.
func (d *Daemon) explainIngress(p *port, f []byte) ingressExplained {
	var ex ingressExplained
	if len(f) < 14 {
		ex.steps = append(ex.steps, traceStep{"in", fmt.Sprintf("%s: %d bytes, shorter than an Ethernet header", p.name, len(f))})
		return ex
	}
	var dst wire.MAC
	copy(dst[:], f[0:6])
	tagged, vid := false, uint16(0)
	ex.l3off = 14
	if len(f) >= 18 && binary.BigEndian.Uint16(f[12:]) == 0x8100 {
		tagged, vid = true, binary.BigEndian.Uint16(f[14:])&0x0fff
		ex.l3off = 18
	}
	b := p.l2.Bridge()
	if b == nil {
		in := "untagged"
		if tagged {
			in = fmt.Sprintf("tagged %d", vid)
		}
		ex.steps = append(ex.steps, traceStep{"in", fmt.Sprintf("routed port %s, %s", p.name, in)})
		return ex
	}
	how := "tagged"
	if !tagged {
		vid, how = p.l2.PVID(), "untagged: the port's pvid"
	}
	ex.steps = append(ex.steps, traceStep{"in", fmt.Sprintf("bridge %s port %s, vlan %d (%s)", b.Name, p.name, vid, how)})
	switch {
	case dst[0]&1 != 0:
		ex.steps = append(ex.steps, traceStep{"fdb", fmt.Sprintf("%s is broadcast/multicast: flooded in vlan %d (and to the bridge's host where it is a member)", dst, vid)})
	default:
		fd, local, ok := b.LookupFDB(dst, vid)
		switch {
		case local:
			ex.steps = append(ex.steps, traceStep{"fdb", fmt.Sprintf("%s is the bridge's own address: to the host (router)", dst)})
		case ok:
			name := "?"
			if dp := d.ports.Load().get(fd.Port.ID); dp != nil {
				name = dp.name
			}
			ex.steps = append(ex.steps, traceStep{"fdb", fmt.Sprintf("hit: %s in vlan %d is on port %s", dst, vid, name)})
		default:
			ex.steps = append(ex.steps, traceStep{"fdb", fmt.Sprintf("miss: %s unknown in vlan %d: flooded to the vlan's members", dst, vid)})
		}
	}
	return ex
}

// explainRouter explains the router's decisions for frame f.
func (d *Daemon) explainRouter(p *port, f []byte, ex ingressExplained, hostVID uint16, hostUntagged bool,
	c l3.PendingCounts, outs []traceOutput) []traceStep {
	var steps []traceStep
	r := d.e.Router()
	var in *l3.Iface
	for _, i := range r.Ifaces() {
		switch {
		case p.l2.Bridge() == nil && i.Port == p.l2:
			in = i
		case p.l2.Bridge() != nil && i.Bridge == p.l2.Bridge() && i.Kind == l3.IfaceVLAN && i.VID == hostVID && !hostUntagged:
			in = i
		case p.l2.Bridge() != nil && i.Bridge == p.l2.Bridge() && i.Kind == l3.IfaceBridge && hostUntagged:
			in = i
		}
	}
	inName := "?"
	if in != nil {
		inName = in.Name
	}
	if ex.l3off > len(f) || binary.BigEndian.Uint16(f[ex.l3off-2:]) != 0x0800 {
		et := uint16(0)
		if ex.l3off <= len(f) {
			et = binary.BigEndian.Uint16(f[ex.l3off-2:])
		}
		detail := fmt.Sprintf("in %s: ethertype %#04x", inName, et)
		if et == 0x0806 {
			detail = fmt.Sprintf("in %s: ARP (%d learned/answered)", inName, c.ARPIn)
		}
		return append(steps, traceStep{"router", detail})
	}
	pkt := f[ex.l3off:]
	h, perr := wire.ParseIPv4(pkt)
	if perr != 0 {
		return append(steps, traceStep{"router", fmt.Sprintf("in %s: not a valid IPv4 header", inName)})
	}
	dst := h.Dst().Netip()
	steps = append(steps, traceStep{"router", fmt.Sprintf("in %s: %s -> %s ttl %d, %d bytes", inName, h.Src().Netip(), dst, h.TTL(), h.TotalLen())})
	// The question the forwarding path asked: with custom rules, the
	// packet's selectors decide which rule and table answer.
	q, _ := l3.RouteQuery(pkt, inName)
	res, ok := d.e.FIB().LookupRouteFlow(q)
	ruleStep := ""
	if res.RuleSet && d.e.FIB().HasCustomRules() {
		ruleStep = fmt.Sprintf("rule %d (%s): ", res.Rule.Priority, ruleAction(&res.Rule))
	}
	if !ok {
		steps = append(steps, traceStep{"fib", fmt.Sprintf("%s%s: no route (network unreachable)", ruleStep, dst)})
		return steps
	}
	rt := res.Route
	if !rt.Prefix.IsValid() { // the rule's own action decided
		steps = append(steps, traceStep{"fib", fmt.Sprintf("%s%s", ruleStep, rt.Type)})
		return append(steps, icmpSteps(c)...)
	}
	fibStep := fmt.Sprintf("%stable %s %s %s", ruleStep, fib.TableName(res.Table), rt.Prefix, rt.Type)
	if rt.Proto != 0 {
		fibStep += " proto " + rt.Proto.String()
	}
	if rt.Metric != 0 {
		fibStep += fmt.Sprintf(" metric %d", rt.Metric)
	}
	nh := rt.NH
	if nh != nil && nh.ID != 0 {
		fibStep += fmt.Sprintf(" nexthop id %d", nh.ID)
	}
	steps = append(steps, traceStep{"fib", fibStep})
	if rt.Type != fib.Unicast || nh == nil {
		if c.Local > 0 {
			steps = append(steps, traceStep{"local", localDetail(f, ex.l3off, c)})
		}
		return append(steps, icmpSteps(c)...)
	}
	member := nh
	if nh.Group != nil {
		key, _ := l3.FlowKey(pkt)
		hash := nexthop.FlowHash(key)
		member = nh.Resolve(hash)
		idx := 0
		for k, m := range nh.Group.Members {
			if m.NH == member {
				idx = k
			}
		}
		steps = append(steps, traceStep{"ecmp", fmt.Sprintf("group of %d: member %d (id %d via %s dev %s), flow hash %#08x of %s:%d -> %s:%d proto %d",
			len(nh.Group.Members), idx+1, member.ID, member.Gateway, member.Dev, hash, key.Src.Netip(), key.SrcPort, key.Dst.Netip(), key.DstPort, key.Proto)})
	}
	if member == nil {
		return append(steps, icmpSteps(c)...)
	}
	next := dst
	how := "directly connected"
	if member.Next4 != 0 {
		next, how = member.Next4.Netip(), "via "+member.Next4.Netip().String()
	}
	steps = append(steps, traceStep{"nexthop", fmt.Sprintf("%s dev %s", how, member.Dev)})
	if out := r.Iface(member.Dev); out != nil {
		if n, ok := r.Neighbours().Get(out.Index, wire.Addr4From(next), d.e.Domain().Clock().Now()); ok {
			detail := fmt.Sprintf("%s dev %s %s", next, member.Dev, n.State)
			if n.HasLLAddr {
				detail += " lladdr " + n.LLAddr.String()
			}
			if c.Queued > 0 {
				detail += ": the packet waits for ARP (queued)"
			}
			for _, o := range outs {
				if o.Generated && strings.Contains(o.Frame, "ARP") {
					detail += "; ARP request sent"
					break
				}
			}
			steps = append(steps, traceStep{"neighbour", detail})
		} else {
			steps = append(steps, traceStep{"neighbour", fmt.Sprintf("%s dev %s: no entry", next, member.Dev)})
		}
		if h.TTL() > 1 {
			mtu := fmt.Sprintf("ttl %d -> %d; mtu %d", h.TTL(), h.TTL()-1, out.MTU)
			switch {
			case c.Fragmented > 0:
				mtu += fmt.Sprintf(": %d bytes > mtu, fragmented", h.TotalLen())
			case c.Drops["frag_needed"] > 0:
				mtu += fmt.Sprintf(": %d bytes > mtu with DF: fragmentation needed", h.TotalLen())
			}
			steps = append(steps, traceStep{"ttl/mtu", mtu})
		} else {
			steps = append(steps, traceStep{"ttl/mtu", fmt.Sprintf("ttl %d: expires here", h.TTL())})
		}
	}
	return append(steps, icmpSteps(c)...)
}

// localDetail explains a frame delivered to the router.
func localDetail(f []byte, l3off int, c l3.PendingCounts) string {
	if c.Punted > 0 {
		return fmt.Sprintf("to the router: punted to the host path (class %s)", hostpath.Classify(f, l3off))
	}
	if len(c.ICMPSent) > 0 {
		return "to the router: answered by netfwd"
	}
	return "to the router"
}

// icmpSteps names the ICMP messages the router sent for the frame.
func icmpSteps(c l3.PendingCounts) []traceStep {
	var steps []traceStep
	for kind, n := range c.ICMPSent {
		steps = append(steps, traceStep{"icmp", fmt.Sprintf("%s sent (%d)", strings.ReplaceAll(kind, "_", " "), n)})
	}
	if c.ICMPRateLimited > 0 {
		steps = append(steps, traceStep{"icmp", "an ICMP error was rate limited"})
	}
	return steps
}

// traceResult sums up what the frame did, from the engine's counts and
// its outputs.
func traceResult(c2 l2.PendingCounts, c3 l3.PendingCounts, outs []traceOutput, bridged, host bool) string {
	var drops []string
	for r := range c2.Drops {
		drops = append(drops, "bridge "+r)
	}
	for r := range c3.Drops {
		drops = append(drops, "router "+r)
	}
	own := 0
	for _, o := range outs {
		if !o.Generated {
			own++
		}
	}
	switch {
	case c3.Queued > 0:
		return "queued: waiting for ARP"
	case c3.Punted > 0:
		return "punted to the host path"
	case c3.Local > 0:
		return "delivered to the router"
	case c3.Forwarded > 0 && c3.Fragmented > 0:
		return fmt.Sprintf("forwarded in %d fragments", own)
	case c3.Forwarded > 0:
		return "forwarded"
	case len(drops) > 0:
		return "dropped: " + strings.Join(drops, ", ")
	case c3.ARPIn > 0:
		return "ARP handled by the router"
	case bridged && (c2.FloodInline > 0 || c2.FloodDeferred > 0):
		return fmt.Sprintf("flooded to %d ports", own)
	case bridged && own > 0:
		return "bridged"
	case host:
		return "to the router"
	}
	return "no output"
}

// describeFrame is a one-line summary of a frame (tcpdump's, shorter).
func describeFrame(f []byte) string {
	if len(f) < 14 {
		return fmt.Sprintf("%d bytes (runt)", len(f))
	}
	var dst, src wire.MAC
	copy(dst[:], f[0:6])
	copy(src[:], f[6:12])
	s := fmt.Sprintf("%s > %s", src, dst)
	off := 12
	et := binary.BigEndian.Uint16(f[off:])
	if et == 0x8100 && len(f) >= 18 {
		s += fmt.Sprintf(" vlan %d", binary.BigEndian.Uint16(f[14:])&0x0fff)
		off = 16
		et = binary.BigEndian.Uint16(f[off:])
	}
	p := f[off+2:]
	switch et {
	case 0x0806:
		if len(p) >= 28 {
			op := "request"
			if binary.BigEndian.Uint16(p[6:]) == 2 {
				op = "reply"
			}
			spa, _ := netip.AddrFromSlice(p[14:18])
			tpa, _ := netip.AddrFromSlice(p[24:28])
			return s + fmt.Sprintf(", ARP %s who-has %s tell %s", op, tpa, spa)
		}
		return s + ", ARP"
	case 0x0800:
		h, err := wire.ParseIPv4(p)
		if err != 0 {
			return s + ", IPv4 (invalid header)"
		}
		s += fmt.Sprintf(", IPv4 %s > %s ttl %d", h.Src().Netip(), h.Dst().Netip(), h.TTL())
		l4 := p[h.IHL():]
		switch h.Protocol() {
		case wire.ProtoICMP:
			if len(l4) >= 2 {
				s += fmt.Sprintf(" ICMP type %d code %d", l4[0], l4[1])
			}
		case wire.ProtoUDP, wire.ProtoTCP:
			name := "UDP"
			if h.Protocol() == wire.ProtoTCP {
				name = "TCP"
			}
			if len(l4) >= 4 {
				s += fmt.Sprintf(" %s %d > %d", name, binary.BigEndian.Uint16(l4), binary.BigEndian.Uint16(l4[2:]))
			}
		default:
			s += fmt.Sprintf(" proto %d", h.Protocol())
		}
		return s
	}
	return s + fmt.Sprintf(", ethertype %#04x", et)
}

// Trace serves a trace query (ctlsock.Handler.Trace): each traced frame's
// record as it comes, until count frames are traced, the client goes or
// the daemon stops.
func (d *Daemon) Trace(q config.Trace, w io.Writer, asJSON bool, flush func() error, gone <-chan struct{}) ([]string, error) {
	if q.Port != "" && d.ports.Load().byName(q.Port) == nil {
		if d.e.Router().Iface(q.Port) != nil || d.e.Domain().Port(q.Port) != nil {
			return nil, fmt.Errorf("trace: %s is not a port (trace the port its frames arrive on)", q.Port)
		}
		return nil, fmt.Errorf("Cannot find device %q", q.Port)
	}
	s := &traceSession{port: q.Port, limit: int64(q.Count), records: make(chan *traceRecord, q.Count)}
	if q.Filter != "" {
		vm, err := compileFilter(q.Filter)
		if err != nil {
			return nil, errors.New(strings.Replace(err.Error(), "capture:", "trace:", 1))
		}
		s.filter = vm
	}
	if !d.trace.CompareAndSwap(nil, s) {
		return nil, fmt.Errorf("trace: a trace is running already")
	}
	defer d.trace.CompareAndSwap(s, nil)
	if err := flush(); err != nil {
		return nil, err
	}
	got := 0
	for got < q.Count {
		select {
		case rec := <-s.records:
			got++
			if asJSON {
				b, _ := json.Marshal(rec)
				w.Write(append(b, '\n'))
			} else {
				w.Write([]byte(rec.text()))
			}
			if len(s.records) == 0 {
				if err := flush(); err != nil {
					return nil, nil
				}
			}
		case <-gone:
			return nil, nil
		case <-d.stop:
			return []string{fmt.Sprintf("trace: %d frames traced; the daemon stopped", got)}, nil
		}
	}
	return []string{fmt.Sprintf("trace: %d frames traced", got)}, nil
}

// text renders a record as ctl prints it.
func (r *traceRecord) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "trace %d: %s in, %d bytes, worker %d, %s\n", r.Seq, r.Port, r.Len, r.Worker, r.Time.UTC().Format("15:04:05.000000"))
	fmt.Fprintf(&b, "  frame      %s\n", r.Frame)
	for _, s := range r.Steps {
		fmt.Fprintf(&b, "  %-10s %s\n", s.Step, s.Detail)
	}
	for _, o := range r.Outputs {
		what := "out"
		if o.Generated {
			what = "generated"
		}
		vlan := "untagged"
		if o.VLAN != 0 {
			vlan = fmt.Sprintf("tagged %d", o.VLAN)
		}
		fmt.Fprintf(&b, "  %-10s %s %s, %d bytes: %s\n", what, o.Port, vlan, o.Len, o.Frame)
	}
	fmt.Fprintf(&b, "  result     %s\n", r.Result)
	return b.String()
}

// ruleAction names what a rule does, for the trace: `lookup TABLE`, or the
// action.
func ruleAction(r *fib.Rule) string {
	switch {
	case r.L3mdev:
		return "lookup [l3mdev-table]"
	case r.Action == fib.RuleLookup:
		return "lookup " + fib.TableName(r.Table)
	}
	return r.Action.String()
}
