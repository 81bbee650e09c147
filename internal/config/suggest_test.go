package config

import (
	"strings"
	"testing"
)

// Errors say what is wrong: a misspelt keyword is an unknown keyword with
// what was meant, not a second destination; a second destination is
// reported only for a second prefix-like word.
func TestMessagesMisspeltKeyword(t *testing.T) {
	for line, want := range map[string]string{
		"route add 10.0.0.0/8 via 192.0.2.1 metrc 5":          `unknown keyword "metrc" (did you mean "metric"?)`,
		"route add 10.0.0.0/8 vai 192.0.2.1":                  `unknown keyword "vai" (did you mean "via"?)`,
		"route add 10.0.0.0/8 nhi 4":                          `unknown keyword "nhi" (did you mean "nhid"?)`,
		"route add 10.0.0.0/8 via 192.0.2.1 tabel 5":          `unknown keyword "tabel" (did you mean "table"?)`,
		"route add blakhole 10.0.0.0/8":                       `unknown keyword "blakhole" (did you mean "blackhole"?)`,
		"route add 10.0.0.0/8 dev eth0 bogus":                 `unknown keyword "bogus"`,
		"route add 10.0.0.0/8 dev eth0 10.1.0.0/16":           `the destination is given twice (10.0.0.0/8, then "10.1.0.0/16")`,
		"route add 10.0.0.0/8 dev eth0 default":               `the destination is given twice (10.0.0.0/8, then "default")`,
		"address add 10.0.0.1/24 dve eth0":                    `unknown keyword "dve" (did you mean "dev"?)`,
		"neigh add 10.0.0.2 lladr 02:00:00:00:00:02 dev eth0": `unknown keyword "lladr" (did you mean "lladdr"?)`,
		"roue add 10.0.0.0/8 dev eth0":                        `unknown object "roue" (did you mean "route"?)`,
		"route ad 10.0.0.0/8 dev eth0 xyzzy":                  `unknown keyword "xyzzy"`,
		"route dle 10.0.0.0/8":                                `unknown route command "dle" (did you mean "delete"?)`,
	} {
		_, _, err := ParseLine(Pos{"t", 1}, line)
		if err == nil || err.Error() != want {
			t.Errorf("ParseLine(%q) = %v\n  want %s", line, err, want)
		}
	}
	// A word that is neither close to a keyword nor a second destination
	// keeps the prefix message where the destination is still expected.
	if _, _, err := ParseLine(Pos{"t", 1}, "route add eth0"); err == nil || err.Error() != `invalid prefix "eth0"` {
		t.Errorf("route add eth0: %v", err)
	}
}

// The words a message offers are exactly what its context accepts: every
// word of an object list parses as that object (`fdb`, not the internal
// name `bridge-fdb`), and a config file is never offered a query word.
func TestMessagesOfferWhatIsAccepted(t *testing.T) {
	_, _, err := ParseLine(Pos{"ctl", 1}, "bridge-fdb show")
	if err == nil || strings.Contains(err.Error(), "bridge-fdb,") || !strings.Contains(err.Error(), "fdb") {
		t.Fatalf("bridge-fdb show: %v", err)
	}
	list := func(err error) []string {
		s := err.Error()
		i := strings.Index(s, "(want ")
		if i < 0 {
			t.Fatalf("no list in %q", s)
		}
		return strings.Split(strings.TrimSuffix(s[i+len("(want "):], ")"), ", ")
	}
	offered := list(err)
	for _, obj := range offered {
		if _, _, err := ParseLine(Pos{"ctl", 1}, obj+" bogusword"); err != nil && strings.Contains(err.Error(), "unknown object") {
			t.Errorf("offered object %q refused: %v", obj, err)
		}
	}
	if !strings.Contains(err.Error(), "stats") || !strings.Contains(err.Error(), "reload") {
		t.Errorf("the control socket's list lacks its queries: %v", err)
	}
	// The config file reader: the same unknown object, no query words.
	errs := Stream("r.conf", strings.NewReader("# c\nqqq show\nroute frob 10.0.0.0/8\nroute\n"), func(*Command) error { return nil })
	if len(errs) != 3 {
		t.Fatalf("errors: %v", errs)
	}
	for _, e := range errs {
		for _, w := range list(e) {
			if queryMeanings[w] || w == "list" || w == "lst" {
				t.Errorf("config file offered the query word %q: %v", w, e)
			}
		}
	}
	if got := errs[0].Error(); !strings.HasPrefix(got, "r.conf:2: unknown object \"qqq\" (want address, route, rule, neighbor, link, nexthop, bridge, ") {
		t.Errorf("config file: %s", got)
	}
	if got := errs[2].Error(); got != "r.conf:4: missing route command (want add, change, replace, append, delete)" {
		t.Errorf("config file, route without a command: %s", got)
	}
}

func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{{"metrc", "metric", 1}, {"vai", "via", 1}, {"", "abc", 3}, {"table", "table", 0}, {"ca", "abc", 3}, {"kitten", "sitting", 3}} {
		if d := editDistance(c.a, c.b); d != c.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, d, c.d)
		}
	}
}
