package pktio

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOnlyDocGoWritesThePackageDoc: go doc joins every comment written
// directly above a package clause into the package documentation, so the
// overview comment of each file must come after its package clause; only
// doc.go speaks for the package (here and in the backends' packages).
func TestOnlyDocGoWritesThePackageDoc(t *testing.T) {
	var files []string
	for _, dir := range []string{".", "afpacket", "afxdp"} {
		m, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(m) == 0 {
			t.Fatalf("%s: %v %v", dir, m, err)
		}
		files = append(files, m...)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		want := filepath.Base(name) == "doc.go"
		if hasDoc := f.Doc != nil; hasDoc != want {
			t.Errorf("%s: package doc comment present = %v, want %v", name, hasDoc, want)
		}
	}
}
