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
// doc.go speaks for the package.
func TestOnlyDocGoWritesThePackageDoc(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
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
		if hasDoc := f.Doc != nil; hasDoc != (name == "doc.go") {
			t.Errorf("%s: package doc comment present = %v, want %v", name, hasDoc, name == "doc.go")
		}
	}
}
