package main

// .ci/run installs the Debian package of every tool the tests run: the Go
// files are scanned for the commands they name, each command maps to its
// package in toolPackages, and the package must be in .ci/run's list. A
// tool added to a test without its package fails here, not on the next
// fresh CI machine.

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// toolPackages: each command the Go code runs, and the Debian package it
// comes from. "" is not a package: the Go toolchain CI runs with, or
// netfwd built from this repository.
var toolPackages = map[string]string{
	"ip":                   "iproute2",
	"ss":                   "iproute2",
	"bridge":               "iproute2",
	"ping":                 "iputils-ping",
	"arping":               "arping",
	"iperf3":               "iperf3",
	"tcpdump":              "tcpdump",
	"ethtool":              "ethtool",
	"trafgen":              "netsniff-ng",
	"pgrep":                "procps",
	"sysctl":               "procps",
	"vtysh":                "frr",
	"/usr/lib/frr/zebra":   "frr",
	"/usr/lib/frr/staticd": "frr",
	"/usr/lib/frr/bgpd":    "frr",
	"bird":                 "bird2",
	"birdc":                "bird2",
	"promtool":             "prometheus",
	"prometheus":           "prometheus",
	"git":                  "git",
	"gcc":                  "gcc",
	"cat":                  "coreutils",
	"chown":                "coreutils",
	"true":                 "coreutils",
	"sleep":                "coreutils",
	"sh":                   "dash",
	"bash":                 "bash",
	"setpriv":              "util-linux",
	"dpkg-query":           "dpkg",
	"go":                   "",
	"netfwd":               "",
}

// essential packages are on every Debian system (Essential: yes).
var essential = []string{"coreutils", "dash", "dpkg", "bash", "util-linux"}

// ciPackages reads the packages=( ... ) list of .ci/run.
func ciPackages(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)\npackages=\((.*?)\n\)`).FindSubmatch(b)
	if m == nil {
		t.Fatal(".ci/run has no packages=( ... ) list")
	}
	var pkgs []string
	for line := range strings.Lines(string(m[1])) {
		line, _, _ = strings.Cut(line, "#")
		pkgs = append(pkgs, strings.Fields(line)...)
	}
	return pkgs
}

// toolUse is one command named in the Go code.
type toolUse struct{ tool, where string }

// scanTools finds the commands the repository's Go files run: the names in
// testenv.RequireRoot and testenv.Have calls, the first word of
// exec.LookPath, exec.Command(Context), testenv.Run and testenv.Output
// calls, the word after `netns exec NS`, and the command of a lab's
// Exec(ns, cmd, ...). Names are string literals or string constants.
func scanTools(t *testing.T, root string) []toolUse {
	t.Helper()
	fset := token.NewFileSet()
	var files []*ast.File
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") {
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			files = append(files, f)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// String constants, as pkg.Name (package name, which is the import
	// path's last element in this repository).
	consts := map[string]string{}
	for _, f := range files {
		for _, decl := range f.Decls {
			if g, ok := decl.(*ast.GenDecl); ok && g.Tok == token.CONST {
				for _, spec := range g.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if i < len(vs.Values) {
							if s, ok := stringLit(vs.Values[i]); ok {
								consts[f.Name.Name+"."+name.Name] = s
							}
						}
					}
				}
			}
		}
	}
	var uses []toolUse
	for _, f := range files {
		value := func(e ast.Expr) (string, bool) {
			switch e := e.(type) {
			case *ast.Ident:
				s, ok := consts[f.Name.Name+"."+e.Name]
				return s, ok
			case *ast.SelectorExpr:
				if x, ok := e.X.(*ast.Ident); ok {
					s, ok := consts[x.Name+"."+e.Sel.Name]
					return s, ok
				}
			}
			return stringLit(e)
		}
		add := func(e ast.Expr) {
			if s, ok := value(e); ok {
				uses = append(uses, toolUse{s, fset.Position(e.Pos()).String()})
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			pkg, fn := callee(call)
			if pkg == "" && f.Name.Name == "testenv" {
				pkg = "testenv"
			}
			args := call.Args
			switch {
			case pkg == "testenv" && (fn == "RequireRoot" || fn == "Have") && len(args) > 1:
				for _, a := range args[1:] {
					add(a)
				}
			case pkg == "exec" && (fn == "LookPath" || fn == "Command") && len(args) > 0:
				add(args[0])
			case pkg == "exec" && fn == "CommandContext" && len(args) > 1:
				add(args[1])
			case pkg == "testenv" && fn == "Run" && len(args) > 1:
				add(args[1])
			case pkg == "testenv" && fn == "Output" && len(args) > 0:
				add(args[0])
			case fn == "Exec" && len(args) > 1:
				add(args[1])
			}
			// ... "netns", "exec", NS, TOOL ...
			for i := 0; i+3 < len(args); i++ {
				a, _ := stringLit(args[i])
				b, _ := stringLit(args[i+1])
				if a == "netns" && b == "exec" {
					add(args[i+3])
				}
			}
			return true
		})
	}
	return uses
}

// callee names a call's function: pkg (or receiver expression's last
// identifier) and function name.
func callee(call *ast.CallExpr) (pkg, fn string) {
	switch f := call.Fun.(type) {
	case *ast.Ident:
		return "", f.Name
	case *ast.SelectorExpr:
		switch x := f.X.(type) {
		case *ast.Ident:
			return x.Name, f.Sel.Name
		case *ast.SelectorExpr:
			return x.Sel.Name, f.Sel.Name
		}
		return "?", f.Sel.Name
	}
	return "", ""
}

func stringLit(e ast.Expr) (string, bool) {
	if b, ok := e.(*ast.BasicLit); ok && b.Kind == token.STRING {
		s, err := strconv.Unquote(b.Value)
		return s, err == nil
	}
	return "", false
}

// TestCIInstallsTools: every tool the Go code runs has a Debian package
// that .ci/run installs (or that every Debian system has).
func TestCIInstallsTools(t *testing.T) {
	pkgs := ciPackages(t)
	uses := scanTools(t, "../..")
	seen := map[string]bool{}
	for _, u := range uses {
		seen[u.tool] = true
		pkg, ok := toolPackages[u.tool]
		switch {
		case !ok:
			t.Errorf("%s: runs %q, which has no Debian package in ci_test.go's toolPackages: add it there and the package to .ci/run", u.where, u.tool)
		case pkg != "" && !slices.Contains(pkgs, pkg) && !slices.Contains(essential, pkg):
			t.Errorf("%s: runs %q from Debian package %s, which .ci/run does not install", u.where, u.tool, pkg)
		}
	}
	// The scan finds what is known to be there: an empty or broken scan
	// would pass everything.
	for _, tool := range []string{"ip", "ping", "arping", "iperf3", "ethtool", "trafgen", "bird", "vtysh", "/usr/lib/frr/zebra", "pgrep"} {
		if !seen[tool] {
			t.Errorf("the scan of the Go files did not find %q", tool)
		}
	}
	for tool, pkg := range toolPackages {
		if pkg != "" && !slices.Contains(pkgs, pkg) && !slices.Contains(essential, pkg) {
			t.Errorf("toolPackages: %s comes from %s, which .ci/run does not install", tool, pkg)
		}
	}
}

// TestCIToolPackagesTable: where dpkg knows an installed tool's file, its
// package is the one toolPackages names (a wrong row would let .ci/run
// install a package that does not bring the tool).
func TestCIToolPackagesTable(t *testing.T) {
	if _, err := exec.LookPath("dpkg-query"); err != nil {
		t.Skip("not Debian: no dpkg-query")
	}
	// Each installed tool's candidate paths; usrmerge: the package may have
	// shipped /bin/x, found as /usr/bin/x.
	paths := map[string][]string{}
	var all []string
	for tool, pkg := range toolPackages {
		if pkg == "" || slices.Contains(essential, pkg) {
			continue
		}
		path, err := exec.LookPath(tool)
		if err != nil {
			continue
		}
		cands := []string{path}
		if rest, ok := strings.CutPrefix(path, "/usr"); ok {
			cands = append(cands, rest)
		} else {
			cands = append(cands, "/usr"+path)
		}
		if real, err := filepath.EvalSymlinks(path); err == nil && real != path {
			cands = append(cands, real)
		}
		paths[tool] = cands
		all = append(all, cands...)
	}
	// One dpkg-query for all (it reads every file list each time); it
	// exits 1 when some path is nobody's, and prints the rest.
	out, _ := exec.Command("dpkg-query", append([]string{"-S"}, all...)...).Output()
	owners := map[string][]string{} // path -> packages
	for line := range strings.Lines(string(out)) {
		names, file, ok := strings.Cut(line, ": ")
		if !ok || strings.HasPrefix(line, "diversion ") {
			continue
		}
		for _, n := range strings.Split(names, ",") {
			n, _, _ = strings.Cut(strings.TrimSpace(n), ":") // pkg:arch
			owners[strings.TrimSpace(file)] = append(owners[strings.TrimSpace(file)], n)
		}
	}
	checked := 0
	for tool, cands := range paths {
		var by []string
		for _, c := range cands {
			by = append(by, owners[c]...)
		}
		if len(by) == 0 {
			continue // installed by hand, not by dpkg
		}
		checked++
		if pkg := toolPackages[tool]; !slices.Contains(by, pkg) {
			t.Errorf("%s (%v) belongs to %v, toolPackages says %s", tool, cands, by, pkg)
		}
	}
	t.Logf("%d installed tools checked against dpkg", checked)
}
