package main

// `netfwd replay --config FILE --in PORT=IN.pcap ... --out DIR`: the engine
// offline. Frames from the input captures are merged in timestamp order and
// fed to the engine on their ports; their timestamps drive the engine's clock
// (ARP timers, FDB ageing, ICMP rate limits); every frame the engine sends is
// written to DIR/PORT.pcap with the timestamp of the input that caused it.
// A summary of the counters ends the run. No root, no interfaces.

import (
	"container/heap"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/netfwd/netfwd/docs/examples"
	"github.com/netfwd/netfwd/internal/apply"
	"github.com/netfwd/netfwd/internal/config"
	"github.com/netfwd/netfwd/internal/pcapfile"
	"github.com/netfwd/netfwd/l2"
	"github.com/netfwd/netfwd/l3"
)

func init() {
	register(command{
		name:  "replay",
		usage: "[--config FILE --in PORT=IN.pcap [--in ...]] [--out DIR]   (no --config: the built-in example)",
		run:   runReplay,
	})
}

type inputs []string

func (i *inputs) String() string     { return strings.Join(*i, ",") }
func (i *inputs) Set(v string) error { *i = append(*i, v); return nil }

// replayClock is the engine's clock during a replay: the capture's time.
type replayClock struct{ ns int64 }

func (c *replayClock) Now() int64 { return c.ns }

type capFrame struct {
	ts   time.Time
	port string
	data []byte
	seq  int // file order breaks ties
}

type frameHeap []capFrame

func (h frameHeap) Len() int { return len(h) }
func (h frameHeap) Less(i, j int) bool {
	if !h[i].ts.Equal(h[j].ts) {
		return h[i].ts.Before(h[j].ts)
	}
	return h[i].seq < h[j].seq
}
func (h frameHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *frameHeap) Push(x any)   { *h = append(*h, x.(capFrame)) }
func (h *frameHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func runReplay(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgFile := fs.String("config", "", "config file (ip -batch syntax)")
	var ins inputs
	fs.Var(&ins, "in", "PORT=FILE.pcap: frames received on PORT (repeatable)")
	outDir := fs.String("out", "", "directory for one PORT.pcap per port that sent frames (default: a new temporary directory, printed at the end)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *outDir == "" {
		// Not the working directory: a run from the repository would leave
		// its output among the sources.
		dir, err := os.MkdirTemp("", "netfwd-replay-")
		if err != nil {
			fmt.Fprintln(stderr, "netfwd replay:", err)
			return 1
		}
		*outDir = dir
	}
	if *cfgFile == "" && len(ins) == 0 {
		dir, err := unpackExample()
		if err != nil {
			fmt.Fprintln(stderr, "netfwd replay:", err)
			return 1
		}
		defer os.RemoveAll(dir)
		*cfgFile = filepath.Join(dir, "replay.conf")
		for _, p := range []string{"eth0", "eth1", "eth2"} {
			ins = append(ins, p+"="+filepath.Join(dir, p+".pcap"))
		}
		fmt.Fprintf(stdout, "netfwd replay: the built-in example (docs/examples/replay.conf and eth0/1/2.pcap)\n")
	}
	if *cfgFile == "" || len(ins) == 0 {
		fmt.Fprintln(stderr, "usage: netfwd replay --config FILE --in PORT=IN.pcap [--in ...] [--out DIR]")
		return 2
	}
	sum, err := replay(*cfgFile, ins, *outDir)
	if err != nil {
		fmt.Fprintln(stderr, "netfwd replay:", err)
		return 1
	}
	fmt.Fprint(stdout, sum)
	fmt.Fprintf(stdout, "output: %s (open with tcpdump -r %s -e)\n", *outDir, filepath.Join(*outDir, "PORT.pcap"))
	return 0
}

// replay runs the whole thing and returns the summary text.
func replay(cfgFile string, ins []string, outDir string) (string, error) {
	var frames frameHeap
	seq := 0
	for _, spec := range ins {
		port, file, ok := strings.Cut(spec, "=")
		if !ok || port == "" || file == "" {
			return "", fmt.Errorf("--in %q: want PORT=FILE.pcap", spec)
		}
		n, err := readPcap(file, port, &frames, &seq)
		if err != nil {
			return "", err
		}
		if n == 0 {
			return "", fmt.Errorf("%s: no frames", file)
		}
	}
	heap.Init(&frames)
	clock := &replayClock{}
	if len(frames) > 0 {
		clock.ns = frames[0].ts.UnixNano()
	}
	e := l3.NewEngine(l3.EngineOptions{Clock: clock})
	ctl := apply.New(e)
	f, err := os.Open(cfgFile)
	if err != nil {
		return "", err
	}
	cmds, errs := config.Parse(cfgFile, f)
	f.Close()
	if len(errs) > 0 {
		return "", errors.Join(errs...)
	}
	if err := ctl.Apply(cmds); err != nil {
		return "", err
	}
	for _, spec := range ins {
		port, _, _ := strings.Cut(spec, "=")
		if e.Domain().Port(port) == nil {
			return "", fmt.Errorf("--in %s: the config names no port %s", spec, port)
		}
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return "", err
	}
	w := e.NewWorker()
	writers := map[string]*pcapfile.Writer{}
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	var writeErr error
	var now time.Time
	sent := map[string]int{}
	flush := func() {
		w.Flush(func(p *l2.Port, out [][]byte) {
			pw := writers[p.Name]
			if pw == nil {
				f, err := os.Create(filepath.Join(outDir, p.Name+".pcap"))
				if err != nil {
					writeErr = err
					return
				}
				files = append(files, f)
				pw, err = pcapfile.NewWriter(f, pcapfile.MaxSnaplen)
				if err != nil {
					writeErr = err
					return
				}
				writers[p.Name] = pw
			}
			for _, fr := range out {
				if err := pw.WritePacket(now, fr, len(fr)); err != nil {
					writeErr = err
				}
				sent[p.Name]++
			}
		})
	}
	const tick = 100 * time.Millisecond
	var lastTick time.Time
	received := map[string]int{}
	for frames.Len() > 0 {
		fr := heap.Pop(&frames).(capFrame)
		// Timers that fell due between frames run first, at their time.
		for !lastTick.IsZero() && fr.ts.Sub(lastTick) >= tick {
			lastTick = lastTick.Add(tick)
			now = lastTick
			clock.ns = max(clock.ns, now.UnixNano())
			w.Tick()
			flush()
		}
		if lastTick.IsZero() {
			lastTick = fr.ts
		}
		now = fr.ts
		clock.ns = max(clock.ns, now.UnixNano())
		w.Receive(e.Domain().Port(fr.port), [][]byte{fr.data})
		received[fr.port]++
		flush()
		if writeErr != nil {
			return "", writeErr
		}
	}
	// Let pending timers (ARP retries, failures) play out for a few seconds.
	for range 50 {
		lastTick = lastTick.Add(tick)
		now = lastTick
		clock.ns = max(clock.ns, now.UnixNano())
		w.Tick()
		flush()
	}
	if writeErr != nil {
		return "", writeErr
	}
	return replaySummary(e, received, sent, outDir), nil
}

func readPcap(file, port string, frames *frameHeap, seq *int) (int, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	r, err := pcapfile.NewReader(f)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", file, err)
	}
	if r.LinkType() != pcapfile.LinkTypeEthernet {
		return 0, fmt.Errorf("%s: link type %d, want Ethernet (1)", file, r.LinkType())
	}
	n := 0
	for {
		data, ts, _, err := r.ReadPacket()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("%s: %w", file, err)
		}
		*frames = append(*frames, capFrame{ts: ts, port: port, data: data, seq: *seq})
		*seq++
		n++
	}
}

func replaySummary(e *l3.Engine, received, sent map[string]int, outDir string) string {
	var b strings.Builder
	ports := map[string]bool{}
	for p := range received {
		ports[p] = true
	}
	for p := range sent {
		ports[p] = true
	}
	var names []string
	for p := range ports {
		names = append(names, p)
	}
	sort.Strings(names)
	fmt.Fprintf(&b, "%-10s %8s %8s\n", "port", "in", "out")
	for _, p := range names {
		fmt.Fprintf(&b, "%-10s %8d %8d", p, received[p], sent[p])
		if sent[p] > 0 {
			fmt.Fprintf(&b, "  %s", filepath.Join(outDir, p+".pcap"))
		}
		b.WriteByte('\n')
	}
	st := e.Stats()
	fmt.Fprintf(&b, "router: forwarded %d, fragmented %d, local %d, arp in %d, icmp rate-limited %d\n",
		st.Forwarded, st.Fragmented, st.Local, st.ARPIn, st.ICMPRateLimited)
	fmt.Fprintf(&b, "held for arp: queued %d, released %d, expired %d\n", st.Queued, st.Released, st.Expired)
	writeNonZero(&b, "router drops", st.Drops)
	writeNonZero(&b, "icmp sent", st.ICMPSent)
	ds := e.Domain().Stats()
	l2drops := map[string]uint64{}
	for _, r := range l2.DropReasons() {
		if n := ds.Drop(r); n > 0 {
			l2drops[r.String()] = n
		}
	}
	writeNonZero(&b, "bridge drops", l2drops)
	return b.String()
}

func writeNonZero(b *strings.Builder, title string, m map[string]uint64) {
	var keys []string
	for k, v := range m {
		if v > 0 {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return
	}
	sort.Strings(keys)
	fmt.Fprintf(b, "%s:", title)
	for _, k := range keys {
		fmt.Fprintf(b, " %s=%d", k, m[k])
	}
	b.WriteByte('\n')
}

// unpackExample writes the embedded example to a temporary directory.
func unpackExample() (string, error) {
	dir, err := os.MkdirTemp("", "netfwd-example-")
	if err != nil {
		return "", err
	}
	for _, name := range []string{"replay.conf", "eth0.pcap", "eth1.pcap", "eth2.pcap"} {
		b, err := examples.FS.ReadFile(name)
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return "", err
		}
	}
	return dir, nil
}
