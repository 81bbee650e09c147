package main

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// docs/daemon.md's flag table gives the defaults `netfwd run` has: every
// row with a quoted default names the flag's real default.
func TestDaemonDocDefaults(t *testing.T) {
	doc, err := os.ReadFile("../../docs/daemon.md")
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	dispatch([]string{"run", "-h"}, strings.NewReader(""), &out, &errb)
	defaults := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^  -(\w+) \w+\n\s+.*\(default "([^"]*)"\)$`).FindAllStringSubmatch(errb.String(), -1) {
		defaults[m[1]] = m[2]
	}
	rows := regexp.MustCompile("(?m)^\\| `--(\\w+)` \\| `([^`]*)` \\|").FindAllStringSubmatch(string(doc), -1)
	if len(rows) < 3 {
		t.Fatalf("found %d flag rows with a default in docs/daemon.md", len(rows))
	}
	for _, r := range rows {
		if got, ok := defaults[r[1]]; !ok || got != r[2] {
			t.Errorf("docs/daemon.md: --%s defaults to %q; netfwd run: %q (%v)", r[1], r[2], got, ok)
		}
	}
}

// docs/architecture.md's import graph is the module's: the "imports" block
// lists every package with exactly the module packages it imports (go list,
// tests not counted), and in the "layers" block every package imports only
// packages to its right on its line or on a later line.
func TestArchitectureImports(t *testing.T) {
	doc, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	const module = "github.com/netfwd/netfwd/"
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("go list: %v", err) // no go tool: nothing to compare with
	}
	real := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		deps := []string{}
		for _, d := range f[1:] {
			if after, ok := strings.CutPrefix(d, module); ok {
				deps = append(deps, after)
			}
		}
		sort.Strings(deps)
		real[strings.TrimPrefix(f[0], module)] = deps
	}

	documented := map[string][]string{}
	for line := range strings.Lines(fenced(t, doc, "imports")) {
		pkg, deps, ok := strings.Cut(line, "->")
		if !ok {
			t.Errorf("imports block: %q has no ->", line)
			continue
		}
		list := []string{}
		for d := range strings.SplitSeq(deps, ",") {
			if d = strings.TrimSpace(d); d != "" {
				list = append(list, d)
			}
		}
		sort.Strings(list)
		documented[strings.TrimSpace(pkg)] = list
	}
	for pkg, deps := range real {
		doc, ok := documented[pkg]
		switch {
		case !ok:
			t.Errorf("docs/architecture.md: package %s is missing from the imports block (imports %v)", pkg, deps)
		case !slices.Equal(doc, deps):
			t.Errorf("docs/architecture.md: %s imports %v, go list says %v", pkg, doc, deps)
		}
	}
	for pkg := range documented {
		if _, ok := real[pkg]; !ok {
			t.Errorf("docs/architecture.md: imports block names %s, which go list does not know", pkg)
		}
	}

	// Layers: a position per package, (line, column) in reading order.
	pos := map[string]int{}
	n := 0
	for line := range strings.Lines(fenced(t, doc, "layers")) {
		for name := range strings.FieldsFuncSeq(line, func(r rune) bool { return r == ',' || r == ' ' || r == '─' || r == '>' || r == '\n' }) {
			if _, dup := pos[name]; dup {
				t.Errorf("layers block: %s appears twice", name)
			}
			pos[name] = n
			n++
		}
		n += 1000 // a new line: later than every name of this one
	}
	for pkg, deps := range real {
		p, ok := pos[pkg]
		if !ok {
			t.Errorf("docs/architecture.md: package %s is missing from the layers block", pkg)
			continue
		}
		for _, d := range deps {
			if q, ok := pos[d]; ok && q <= p {
				t.Errorf("layers block: %s imports %s, which is not to its right or below", pkg, d)
			}
		}
	}
}

// fenced returns the body of the doc's fenced block with the given info string.
func fenced(t *testing.T, doc []byte, info string) string {
	t.Helper()
	_, rest, ok := strings.Cut(string(doc), "```"+info+"\n")
	if !ok {
		t.Fatalf("docs/architecture.md has no ```%s block", info)
	}
	body, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatalf("docs/architecture.md: the ```%s block is not closed", info)
	}
	return body
}

// docRef is a path under docs/ that text names as the place to read on.
var docRef = regexp.MustCompile(`docs/[A-Za-z0-9_./-]+\.md`)

// Every docs/*.md that netfwd's help names exists: the usage lines, each
// command's -h (its flags' usage strings), and every string literal of the
// command's sources (messages printed later), as does every docs/*.md
// README.md names. (`netfwd run --help` once sent --takeover's reader to a
// docs/operations.md that never was.)
func TestHelpNamesExistingDocs(t *testing.T) {
	check := func(where, text string) int {
		t.Helper()
		refs := docRef.FindAllString(text, -1)
		for _, ref := range refs {
			if _, err := os.Stat(filepath.Join("../..", ref)); err != nil {
				t.Errorf("%s names %s, which does not exist", where, ref)
			}
		}
		return len(refs)
	}
	var b bytes.Buffer
	usage(&b)
	check("netfwd --help", b.String())
	helped := 0
	for _, args := range [][]string{{"run", "-h"}, {"ctl", "-h"}, {"restart", "-h"}, {"replay", "-h"},
		{"route", "get", "-h"}, {"route", "show", "-h"}, {"twins", "remove", "-h"}} {
		var out, errb bytes.Buffer
		dispatch(args, strings.NewReader(""), &out, &errb)
		helped += check("netfwd "+strings.Join(args, " "), out.String()+errb.String())
	}
	if helped < 3 { // run -h alone names docs/pktio.md, hostpath.md, reliability.md
		t.Errorf("the -h outputs name %d docs: the test does not see the flags' usage", helped)
	}

	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				check(fset.Position(lit.Pos()).String(), lit.Value)
			}
			return true
		})
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if check("README.md", string(readme)) == 0 {
		t.Error("README.md names no docs/*.md: the pattern is wrong")
	}
}

// The commands a newcomer pastes run as root without sudo: a fresh Debian
// machine where one is root has no sudo (`sudo: command not found`). The
// docs say "as root" and leave sudo to those who are not.
func TestQuickStartNeedsNoSudo(t *testing.T) {
	sudoLine := regexp.MustCompile("(?m)^ {4,}(\\S+ && )?sudo .*$|`sudo [^`]*`")
	for _, name := range []string{"README.md", "docs/lab.md", "docs/e2e.md", "docs/bench-veth.md", "docs/architecture.md"} {
		b, err := os.ReadFile("../../" + name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range sudoLine.FindAllString(string(b), -1) {
			if !strings.Contains(m, `sudo env "PATH=$PATH"`) { // the note for those who are not root
				t.Errorf("%s: %q: say \"as root\" instead", name, m)
			}
		}
	}
}
