package aggregates_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// requestParts are the first element of an HTTP request location
// (["body", "name"], ["query", "class_id"]).
var requestParts = map[string]bool{"body": true, "query": true, "path": true, "header": true, "cookie": true}

// route matches wording that names an HTTP operation ("GET /models").
var route = regexp.MustCompile(`\b(GET|HEAD|POST|PUT|PATCH|DELETE|OPTIONS) /`)

// The domain names fields; only api/ knows where a request carries them and
// which route lists what (STYLE practice 15). This keeps HTTP out of the
// aggregates' errors: no request location ([]any{"body", ...}, or "query" as
// a field), no edge-only error constructor, no route in a message.
func TestAggregatesKnowNoHTTP(t *testing.T) {
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
			switch n := n.(type) {
			case *ast.CompositeLit:
				if selector(n.Type) == "derrors.LocatedError" {
					t.Errorf("%s: derrors.LocatedError is the HTTP edge's; use derrors.InvalidField", fset.Position(n.Pos()))
				}
				if len(n.Elts) > 0 && requestParts[stringLit(n.Elts[0])] {
					t.Errorf("%s: a request location %s; name the field (derrors.InvalidField) and let api/ place it",
						fset.Position(n.Pos()), stringLit(n.Elts[0]))
				}
			case *ast.CallExpr:
				switch call := selector(n.Fun); call {
				case "derrors.Invalid":
					t.Errorf("%s: %s is the HTTP edge's; use derrors.InvalidField", fset.Position(n.Pos()), call)
				case "derrors.InvalidField", "derrors.Item":
					if len(n.Args) > 0 && requestParts[stringLit(n.Args[0])] {
						t.Errorf("%s: field %s names a request location, not a field", fset.Position(n.Pos()), stringLit(n.Args[0]))
					}
				}
			case *ast.BasicLit:
				if s := stringLit(n); route.MatchString(s) {
					t.Errorf("%s: %q names an HTTP route; give the error a Kind and let api/ word it", fset.Position(n.Pos()), s)
				}
			}
			return true
		})
	}
}

// selector returns "pkg.Name" for a pkg.Name expression, else "".
func selector(e ast.Expr) string {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	pkg, ok := sel.X.(*ast.Ident)
	if !ok {
		return ""
	}
	return pkg.Name + "." + sel.Sel.Name
}

// stringLit returns the value of a string literal, else "".
func stringLit(e ast.Expr) string {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return ""
	}
	s, err := strconv.Unquote(lit.Value)
	if err != nil {
		return ""
	}
	return s
}
