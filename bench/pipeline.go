package bench

// Suite pipeline: 64-byte frames through the whole engine (l3.Engine:
// bridge, router, transmit batching), in batches of 64 flushed to a sink:
//   routed           from a routed port to random destinations over the full
//                    table, out of the uplink (FIB lookup, TTL, neighbour, rewrite)
//   bridged-unicast  known unicast between two ports of a VLAN-aware bridge
//   bridged-flood    broadcast in a VLAN of a 64-port bridge with 2 members
//   fib-lookup       the bare FIB lookup on the same destinations as routed,
//                    measured in the same run: routed's cost minus this one is
//                    what the pipeline adds around the lookup.
// Each batch is first copied from a template (the router rewrites frames in
// place), which approximates a receive copy and is included in the figures.

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/netfwd/netfwd/internal/apply"
	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/internal/fulltable"
	"github.com/netfwd/netfwd/l2"
	"github.com/netfwd/netfwd/l3"
	"github.com/netfwd/netfwd/wire"
)

func init() {
	Register(Suite{Name: "pipeline", Doc: "64-byte frames through the whole engine: routed, bridged unicast, bridged flood, bare FIB lookup", Run: runPipeline})
}

const pipelineBatch = 64

// PipelineCase is a built engine with its input frames.
type PipelineCase struct {
	E      *l3.Engine
	W      *l3.Worker
	In     *l2.Port
	Frames [][]byte // templates, copied into the batch before each pass
	batch  [][]byte
	sink   func(*l2.Port, [][]byte)
	Out    int // frames handed to the sink
}

func newCase(conf string, compiled bool) (*l3.Engine, *apply.Controller, error) {
	e := l3.NewEngine(l3.EngineOptions{Compiled: compiled})
	c := apply.New(e)
	cmds, errs := config.Parse("pipeline.conf", strings.NewReader(conf))
	if len(errs) > 0 {
		return nil, nil, errs[0]
	}
	return e, c, c.Apply(cmds)
}

// ethIPv4UDP builds a 64-byte Ethernet frame (60 + FCS) with an IPv4/UDP
// packet, optionally VLAN-tagged.
func ethIPv4UDP(dst, src wire.MAC, vid uint16, ipSrc, ipDst netip.Addr) []byte {
	f := make([]byte, 0, 64)
	f = append(f, dst[:]...)
	f = append(f, src[:]...)
	if vid != 0 {
		f = append(f, 0x81, 0x00, byte(vid>>8), byte(vid))
	}
	f = append(f, 0x08, 0x00)
	ip := make([]byte, 46-4*boolInt(vid != 0)) // pad to a 60-byte frame
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	ip[2], ip[3] = 0, byte(len(ip))
	a, b := ipSrc.As4(), ipDst.As4()
	copy(ip[12:], a[:])
	copy(ip[16:], b[:])
	ip[20], ip[21], ip[22], ip[23] = 0x10, 0x00, 0x00, 0x35 // ports 4096 -> 53
	ip[24], ip[25] = 0, byte(len(ip)-20)
	c := wire.Checksum(ip[:20])
	ip[10], ip[11] = byte(c>>8), byte(c)
	return append(f, ip...)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// NewRoutedCase: the full table on the uplink eth0, frames from eth1,
// looked up through the compiled FIB or the trie.
func NewRoutedCase(routes []netip.Prefix, dsts []netip.Addr, compiled bool) (*PipelineCase, error) {
	var b strings.Builder
	b.WriteString("address add 192.0.2.1/24 dev eth0\naddress add 198.51.100.1/24 dev eth1\n")
	for _, p := range routes {
		fmt.Fprintf(&b, "route add %s via 192.0.2.254 dev eth0\n", p)
	}
	e, _, err := newCase(b.String(), compiled)
	if err != nil {
		return nil, err
	}
	e.Router().SetNeighbor("eth0", netip.MustParseAddr("192.0.2.254"), wire.MustParseMAC("02:00:00:00:00:fe"))
	in := e.Domain().Port("eth1")
	src := wire.MustParseMAC("02:00:00:00:01:01")
	c := &PipelineCase{E: e, W: e.NewWorker(), In: in}
	for _, d := range dsts {
		c.Frames = append(c.Frames, ethIPv4UDP(e.Router().Iface("eth1").MAC, src, 0, netip.MustParseAddr("198.51.100.7"), d))
	}
	return c, nil
}

// NewBridgedUnicastCase: two access ports of VLAN 10 with known hosts.
func NewBridgedUnicastCase() (*PipelineCase, error) {
	conf := `link add br0 type bridge vlan_filtering 1
link set p0 master br0
link set p1 master br0
bridge vlan add dev p0 vid 10 pvid untagged
bridge vlan add dev p1 vid 10 pvid untagged
bridge fdb add 02:00:00:00:00:0a dev p0 vlan 10 static
bridge fdb add 02:00:00:00:00:0b dev p1 vlan 10 static
`
	e, _, err := newCase(conf, false)
	if err != nil {
		return nil, err
	}
	c := &PipelineCase{E: e, W: e.NewWorker(), In: e.Domain().Port("p0")}
	c.Frames = [][]byte{ethIPv4UDP(wire.MustParseMAC("02:00:00:00:00:0b"), wire.MustParseMAC("02:00:00:00:00:0a"), 0,
		netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"))}
	return c, nil
}

// NewBridgedFloodCase: 64 ports, VLAN 10 on two of them (tagged), broadcast.
func NewBridgedFloodCase() (*PipelineCase, error) {
	var b strings.Builder
	b.WriteString("link add br0 type bridge vlan_filtering 1 vlan_default_pvid 0\n")
	for i := range 64 {
		fmt.Fprintf(&b, "link set p%d master br0\nbridge vlan add dev p%d vid 20\n", i, i)
	}
	b.WriteString("bridge vlan add dev p0 vid 10\nbridge vlan add dev p1 vid 10\n")
	e, _, err := newCase(b.String(), false)
	if err != nil {
		return nil, err
	}
	c := &PipelineCase{E: e, W: e.NewWorker(), In: e.Domain().Port("p0")}
	c.Frames = [][]byte{ethIPv4UDP(wire.BroadcastMAC, wire.MustParseMAC("02:00:00:00:00:0a"), 10,
		netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.255"))}
	return c, nil
}

// Body runs n frames through the engine in batches.
func (c *PipelineCase) Body() func(n int) {
	buf := make([]byte, 0, pipelineBatch*64)
	c.batch = make([][]byte, pipelineBatch)
	for i := range c.batch {
		c.batch[i] = buf[i*64 : i*64+64 : i*64+64]
	}
	c.sink = func(_ *l2.Port, frames [][]byte) { c.Out += len(frames) }
	next := 0
	return func(n int) {
		for done := 0; done < n; done += pipelineBatch {
			k := min(pipelineBatch, n-done)
			for i := range k {
				t := c.Frames[next]
				next++
				if next == len(c.Frames) {
					next = 0
				}
				c.batch[i] = c.batch[i][:len(t)]
				copy(c.batch[i], t)
			}
			c.W.Receive(c.In, c.batch[:k])
			c.W.Flush(c.sink)
		}
	}
}

func runPipeline(o Options) ([]Record, error) {
	nRoutes, nProbes := 0, 1<<20
	if o.Quick {
		nRoutes, nProbes = 50_000, 1<<14
	}
	all, err := fulltable.Load()
	if err != nil {
		return nil, err
	}
	if nRoutes > 0 {
		all = all[:nRoutes]
	}
	dsts := fulltable.RandomProbes(all, nProbes, 7)
	// Every case is built first and measured in interleaved rounds
	// (bench/interleave.go), so the routed/lookup ratio comes from the same
	// moments of a noisy machine.
	type pcase struct {
		impl   string
		params map[string]any
		body   func(n int)
		out    *int // frames the case forwarded (must move)
	}
	var cases []pcase
	for _, mode := range []string{"compiled", "trie"} {
		routed, err := NewRoutedCase(all, dsts, mode == "compiled")
		if err != nil {
			return nil, err
		}
		f := routed.E.FIB()
		mask := len(dsts) - 1
		params := map[string]any{"routes": len(all), "probe": "random", "frame": 64, "fib": mode}
		cases = append(cases,
			pcase{"fib-lookup", params, func(n int) {
				for i := range n {
					sinkNH = f.Lookup(dsts[i&mask])
				}
			}, nil},
			pcase{"routed", params, routed.Body(), &routed.Out})
	}
	uni, err := NewBridgedUnicastCase()
	if err != nil {
		return nil, err
	}
	fl, err := NewBridgedFloodCase()
	if err != nil {
		return nil, err
	}
	cases = append(cases,
		pcase{"bridged-unicast", map[string]any{"ports": 2, "frame": 64}, uni.Body(), &uni.Out},
		pcase{"bridged-flood", map[string]any{"ports": 64, "members": 2, "frame": 64}, fl.Body(), &fl.Out})
	bodies := make([]func(n int), len(cases))
	for i, c := range cases {
		bodies[i] = c.body
	}
	// 36 rounds (~9 s): over_lookup_ns is routed minus fib-lookup, and a
	// difference of two minimums needs both to have met quiet moments.
	results := interleavedRounds(o, bodies, 36)
	var recs []Record
	var lookup Result
	for i, c := range cases {
		r := results[i]
		if c.out != nil && *c.out == 0 {
			return nil, fmt.Errorf("%s %v forwarded nothing", c.impl, c.params)
		}
		var extra map[string]any
		switch c.impl {
		case "fib-lookup":
			lookup = r
		case "routed":
			extra = map[string]any{"over_lookup_ns": round2(r.NsOp - lookup.NsOp)}
		}
		recs = append(recs, Record{Suite: "pipeline", Impl: c.impl, Params: c.params, NsOp: r.NsOp, Mops: r.Mops(), AllocsOp: r.AllocsOp, Extra: extra})
		o.Log("%s %v: %.1f ns/packet, %.2f Mpps", c.impl, c.params, r.NsOp, r.Mops())
	}
	return recs, nil
}
