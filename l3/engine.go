package l3

// The Engine composes the bridge domain and the router: the one type that
// replay, tests, benchmarks and the daemon drive. Each datapath goroutine
// gets a Worker; frames go in with Worker.Receive and come out per port with
// Worker.Flush, with zero allocations per frame.
//
// Locking: mu guards the list of worker counter blocks; everything the
// datapath reads is published lock-free by the domain, the FIB and the
// router.

import (
	"sync"

	"github.com/netfwd/netfwd/fib"
	"github.com/netfwd/netfwd/l2"
	"github.com/netfwd/netfwd/neigh"
	"github.com/netfwd/netfwd/nexthop"
	"github.com/netfwd/netfwd/wire"
)

// EngineOptions configure an Engine.
type EngineOptions struct {
	Clock     l2.Clock // nil: monotonic
	Trie      fib.TrieKind
	Compiled  bool // lookups through the compiled FIB (fib.Options.Compiled)
	RateLimit RateLimitConfig
	Neigh     neigh.Config
	Tx        l2.TxOptions
}

// Engine is the bridge plus the router.
type Engine struct {
	dom  *l2.Domain
	r    *Router
	opts EngineOptions

	mu     sync.Mutex
	blocks []*publishedCounters // guarded by mu
}

// NewEngine returns an engine with an empty configuration.
func NewEngine(opts EngineOptions) *Engine {
	dom := l2.NewDomain(l2.DomainOptions{Clock: opts.Clock})
	e := &Engine{dom: dom, opts: opts}
	e.r = newRouter(dom, routerOptions{Trie: opts.Trie, Compiled: opts.Compiled, RateLimit: opts.RateLimit, Neigh: opts.Neigh})
	return e
}

// Domain returns the bridge domain (ports, bridges, FDB).
func (e *Engine) Domain() *l2.Domain { return e.dom }

// Router returns the router (interfaces, FIB, neighbours).
func (e *Engine) Router() *Router { return e.r }

// FIB returns the router's FIB.
func (e *Engine) FIB() *fib.FIB { return e.r.fib }

// NewWorker returns a datapath worker (one per goroutine).
func (e *Engine) NewWorker() *Worker {
	w := &Worker{e: e, r: e.r, tx: e.dom.NewTx(e.opts.Tx), pub: new(publishedCounters), nw: e.r.neigh.NewWorker()}
	e.mu.Lock()
	e.blocks = append(e.blocks, w.pub)
	e.mu.Unlock()
	return w
}

// Stats sums the router counters of every worker.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	blocks := append([]*publishedCounters(nil), e.blocks...)
	e.mu.Unlock()
	return sumCounters(blocks)
}

// lookupFlow is the FIB lookup of one flow: the rule walk with custom
// rules (the forwarding path's packets then, and the router's own always),
// the merged lookup otherwise.
func (e *Engine) lookupFlow(k *fib.Flow) *nexthop.Nexthop {
	return e.r.fib.LookupFlow(k)
}

// lookupBatch is the FIB lookup of the forwarding path, a batch at a time,
// for Linux's default rules (destinations decide alone).
func (e *Engine) lookupBatch(dsts []wire.Addr4, out []*nexthop.Nexthop, idx []uint32) {
	e.r.fib.LookupBatch4(dsts, out, idx)
}

// customRules reports whether route decisions need whole flows (once per
// batch).
func (e *Engine) customRules() bool { return e.r.fib.HasCustomRules() }
