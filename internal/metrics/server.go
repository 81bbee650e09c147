package metrics

// The HTTP side: /metrics (the collector plus the Go runtime and process
// collectors), and /debug/pprof/ on a listener of its own that the daemon
// opens only when asked to (--pprof): the metrics listener is reachable by
// every local user, and profiles, goroutine dumps and the command line are
// not theirs to read.
//
// Locking: none (net/http serves each request on its own goroutine).

import (
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler serves /metrics for c.
func Handler(c prometheus.Collector) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(c, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	mux.HandleFunc("/", index("netfwd: /metrics\n"))
	return mux
}

// index answers the root path with a line naming what is served, and
// every other unknown path with 404.
func index(text string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(text))
	}
}

// PprofHandler serves /debug/pprof/.
func PprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/", index("netfwd: /debug/pprof/\n"))
	return mux
}
