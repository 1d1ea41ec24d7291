package layers

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// frontEnds are the directories, from the repository's root, of the code
// that uses the store; their packages, and the packages below them.
var frontEnds = []string{"cmd/casctl", "mcp", "adapters"}

// below are the packages a front end never imports: store is the only
// place that knows both the blobs and the index.
var below = []string{"github.com/toolcas/toolcas/cas", "github.com/toolcas/toolcas/index"}

// TestFrontEndsUseTheFacade parses every Go file of the front ends, but
// their tests, which may plant damage with the layers below, and fails on
// an import of cas or index.
func TestFrontEndsUseTheFacade(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	for _, dir := range frontEnds {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			files++
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				for _, b := range below {
					if p == b {
						rel, _ := filepath.Rel(root, path)
						t.Errorf("%s imports %s: a front end uses store, hook, policy and compact", rel, p)
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if files < 30 {
		t.Fatalf("read %d files of the front ends: the walk missed them", files)
	}
}

// maxStoreFunc is the most lines a function of store/ may take, from its
// func line to its closing brace: past it, a function holds steps that
// want names of their own.
const maxStoreFunc = 100

// TestStoreFunctionsStayShort fails on a function of store/ (its tests
// aside) longer than maxStoreFunc lines.
func TestStoreFunctionsStayShort(t *testing.T) {
	dir, err := filepath.Abs("../../store")
	if err != nil {
		t.Fatal(err)
	}
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	funcs := 0
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			funcs++
			if n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; n > maxStoreFunc {
				t.Errorf("store/%s: %s is %d lines, over %d", filepath.Base(path), fn.Name.Name, n, maxStoreFunc)
			}
		}
	}
	if funcs < 100 {
		t.Fatalf("read %d functions of store/: the glob missed them", funcs)
	}
}
