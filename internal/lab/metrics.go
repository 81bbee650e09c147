package lab

// A reader of the Prometheus text exposition format, enough for the lab and
// the tests to check counters: `name{label="value",...} value` lines,
// comments skipped. (The format is simple; prometheus/common's parser is
// not one of the project's dependencies.)
//
// Locking: none; a Metrics is a value.

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Sample is one metric sample.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Key is the sample's name and labels, labels sorted: name{a="1",b="2"}.
func (s Sample) Key() string {
	if len(s.Labels) == 0 {
		return s.Name
	}
	keys := make([]string, 0, len(s.Labels))
	for k := range s.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(s.Name)
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", k, s.Labels[k])
	}
	b.WriteByte('}')
	return b.String()
}

// Metrics is one scrape.
type Metrics struct {
	Samples []Sample
}

// ParseMetrics reads the text format.
func ParseMetrics(r io.Reader) (*Metrics, error) {
	m := &Metrics{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		s, err := parseSample(line)
		if err != nil {
			return nil, fmt.Errorf("metrics line %d: %w: %q", n, err, line)
		}
		m.Samples = append(m.Samples, s)
	}
	return m, sc.Err()
}

func parseSample(line string) (Sample, error) {
	s := Sample{Labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i <= 0 {
		return s, fmt.Errorf("no value")
	}
	s.Name, line = line[:i], line[i:]
	if line[0] == '{' {
		line = line[1:]
		for {
			line = strings.TrimLeft(line, " ,")
			if strings.HasPrefix(line, "}") {
				line = line[1:]
				break
			}
			eq := strings.IndexByte(line, '=')
			if eq <= 0 || len(line) < eq+2 || line[eq+1] != '"' {
				return s, fmt.Errorf("bad label")
			}
			name := strings.TrimSpace(line[:eq])
			rest := line[eq+2:]
			var val strings.Builder
			j := 0
			for ; j < len(rest) && rest[j] != '"'; j++ {
				if rest[j] == '\\' && j+1 < len(rest) {
					j++
					switch rest[j] {
					case 'n':
						val.WriteByte('\n')
					default:
						val.WriteByte(rest[j])
					}
					continue
				}
				val.WriteByte(rest[j])
			}
			if j == len(rest) {
				return s, fmt.Errorf("unterminated label value")
			}
			s.Labels[name] = val.String()
			line = rest[j+1:]
		}
	}
	f := strings.Fields(line)
	if len(f) < 1 {
		return s, fmt.Errorf("no value")
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return s, err
	}
	s.Value = v
	return s, nil
}

// match reports whether s has every label of want (pairs "k", "v", ...).
func (s Sample) match(want []string) bool {
	for i := 0; i+1 < len(want); i += 2 {
		if s.Labels[want[i]] != want[i+1] {
			return false
		}
	}
	return true
}

// Sum adds the samples of a metric whose labels include the given pairs
// ("reason", "ip_checksum", ...); 0 when there are none.
func (m *Metrics) Sum(name string, labels ...string) float64 {
	v := 0.0
	for _, s := range m.Samples {
		if s.Name == name && s.match(labels) {
			v += s.Value
		}
	}
	return v
}

// Scrape fetches and parses a metrics URL with client (nil: a default
// client with a 5 s timeout).
func Scrape(client *http.Client, url string) (*Metrics, error) {
	if client == nil {
		client = &http.Client{Timeout: 5 * time.Second}
	}
	resp, err := client.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return ParseMetrics(resp.Body)
}
