package store_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/refill-dev/refill/store"
)

// TestSuiteCoversEveryOperation holds the conformance suite to the store
// it vouches for: every exported method of *store.Store and *store.Tx must
// be called by storetest.Exercise, directly or through the areas and
// helpers it calls, so each runs on both engines. The methods come from
// reflect; the calls from type-checking the suite's own source, so a method
// counts only when the suite really calls it, not when a list kept beside
// it says so.
func TestSuiteCoversEveryOperation(t *testing.T) {
	t.Parallel()
	called := suiteCalls(t)
	var missing []string
	for _, typ := range []reflect.Type{reflect.TypeFor[*store.Store](), reflect.TypeFor[*store.Tx]()} {
		for m := range typ.Methods() {
			name := typ.Elem().Name() + "." + m.Name
			if !called[name] {
				missing = append(missing, name)
			}
		}
	}
	if len(missing) > 0 {
		t.Errorf("storetest.Exercise never calls %s: exercise each in the suite, so that it runs on SQLite and PostgreSQL",
			strings.Join(missing, ", "))
	}
}

// suiteCalls type-checks store/storetest against the export data of its
// imports and returns the methods of store.Store and store.Tx that code
// reachable from Exercise calls (or takes as method values), as
// "Store.Plan", "Tx.Append".
func suiteCalls(t *testing.T) map[string]bool {
	t.Helper()
	const suite = "github.com/refill-dev/refill/store/storetest"
	cmd := exec.CommandContext(t.Context(), "go", "list", "-export", "-deps", "-json=ImportPath,Export,Dir,GoFiles", suite)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", suite, err, stderr.Bytes())
	}
	type pkg struct {
		ImportPath, Export, Dir string
		GoFiles                 []string
	}
	exports := map[string]string{}
	var self pkg
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list: %v", err)
		}
		exports[p.ImportPath] = p.Export
		if p.ImportPath == suite {
			self = p
		}
	}
	if len(self.GoFiles) == 0 {
		t.Fatalf("go list found no source files of %s", suite)
	}

	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range self.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(self.Dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	lookup := func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok || file == "" {
			return nil, errors.New("no export data for " + path)
		}
		return os.Open(file)
	}
	info := &types.Info{
		Defs:       map[*ast.Ident]types.Object{},
		Uses:       map[*ast.Ident]types.Object{},
		Selections: map[*ast.SelectorExpr]*types.Selection{},
	}
	conf := types.Config{Importer: importer.ForCompiler(fset, "gc", lookup)}
	if _, err := conf.Check(suite, fset, files, info); err != nil {
		t.Fatalf("type-check %s: %v", suite, err)
	}

	// Only code Exercise reaches counts: an area written but never wired
	// into the suite runs on no engine.
	decls := map[types.Object]*ast.FuncDecl{}
	for _, f := range files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
				decls[info.Defs[fd.Name]] = fd
			}
		}
	}
	var entry *ast.FuncDecl
	for obj, fd := range decls {
		if obj.Name() == "Exercise" && fd.Recv == nil {
			entry = fd
		}
	}
	if entry == nil {
		t.Fatalf("%s has no func Exercise", suite)
	}
	storePkg := reflect.TypeFor[store.Store]().PkgPath()
	called := map[string]bool{}
	seen := map[*ast.FuncDecl]bool{entry: true}
	for todo := []*ast.FuncDecl{entry}; len(todo) > 0; {
		fd := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.Ident:
				if next, ok := decls[info.Uses[n]]; ok && !seen[next] {
					seen[next] = true
					todo = append(todo, next)
				}
			case *ast.SelectorExpr:
				sel, ok := info.Selections[n]
				if !ok || sel.Kind() == types.FieldVal {
					return true
				}
				fn := sel.Obj().(*types.Func)
				recv := fn.Signature().Recv().Type()
				if ptr, ok := recv.(*types.Pointer); ok {
					recv = ptr.Elem()
				}
				if named, ok := recv.(*types.Named); ok && named.Obj().Pkg() != nil && named.Obj().Pkg().Path() == storePkg {
					called[named.Obj().Name()+"."+fn.Name()] = true
				}
			}
			return true
		})
	}
	if !called["Store.Plan"] {
		t.Fatalf("the suite's calls were not found: Store.Plan is not among %v", called)
	}
	return called
}
