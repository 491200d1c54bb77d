package e2e

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// lane lets several processes of this package share its tests (`make test`, hack/test.sh):
// each process has its own local cluster and operator, all of them run the tests in the same
// order, and the first to reach a test claims it by creating a file named after it in
// $E2E_QUEUE; the others skip it. Tests so spread over the lanes as each lane finishes its
// previous one, with no table of durations to keep up to date, and a test that kills the
// operator kills only its own lane's. Without E2E_QUEUE (go test of this package alone) every
// test runs.
//
// Every test calls it first; TestEveryTestTakesALane keeps it so.
func lane(t *testing.T) {
	t.Helper()
	dir := os.Getenv("E2E_QUEUE")
	if dir == "" {
		return
	}
	f, err := os.OpenFile(filepath.Join(dir, t.Name()), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if errors.Is(err, fs.ErrExist) {
		t.Skip("run by another lane")
	}
	if err != nil {
		t.Fatalf("claim %s in %s: %v", t.Name(), dir, err)
	}
	_, err = fmt.Fprintln(f, os.Getenv("E2E_LANE"))
	if err = errors.Join(err, f.Close()); err != nil {
		t.Fatalf("claim %s: %v", t.Name(), err)
	}
}

// TestEveryTestTakesALane fails when a test of this package does not call lane first: it would
// run in every lane, on every lane's cluster, each time `make test` runs.
func TestEveryTestTakesALane(t *testing.T) {
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	tests := 0
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Test") ||
				fn.Name.Name == "TestMain" || fn.Name.Name == "TestEveryTestTakesALane" {
				continue
			}
			tests++
			if !callsLaneFirst(fn) {
				t.Errorf("%s: %s does not call lane(t) first", fset.Position(fn.Pos()), fn.Name.Name)
			}
		}
	}
	if tests < 10 {
		t.Fatalf("found %d tests in %v: the check read the wrong directory", tests, files)
	}
}

func callsLaneFirst(fn *ast.FuncDecl) bool {
	if fn.Body == nil || len(fn.Body.List) == 0 {
		return false
	}
	stmt, ok := fn.Body.List[0].(*ast.ExprStmt)
	if !ok {
		return false
	}
	call, ok := stmt.X.(*ast.CallExpr)
	if !ok {
		return false
	}
	id, ok := call.Fun.(*ast.Ident)
	return ok && id.Name == "lane"
}
