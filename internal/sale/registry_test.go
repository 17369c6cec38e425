package sale_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/seckill-go/seckill-go/internal/sale"
)

// registryFile is the strategy registry, the one place that lists strategies.
const registryFile = "internal/sale/strategies.go"

// allowedLists are the lists of strategies allowed outside the registry, file → variable: a
// table keyed by registry strategy whose keys a test holds to the registry, or a sample chosen
// for what it measures rather than a list of what exists.
var allowedLists = map[string]string{
	// The zoo's harness pieces (unstall, servers to restart): TestZooHarnessesKeyedByRegistry.
	"loadtest/internal/zoo/zoo.go": "zooHarnesses",
	// The bench's returns phase: one strategy per way units go back (the stock row, a lock's
	// critical section, the Lua state), a sample for the measurement.
	"loadtest/bench/main.go": "returnStrategies",
}

// ambiguous are the strategy names that also name a family of strategies or a service (a
// /readyz check, a fault, a store the buckets measure): a list of such names alone, as strings,
// is not taken for a list of strategies. A list that names one other strategy is, and a list of
// the registry's constants always is.
var ambiguous = map[string]bool{"mysql": true, "redis": true, "zk": true, "memcached": true, "none": true}

// TestNoStrategyListOutsideRegistry: no non-test Go or JavaScript source of the module lists
// strategies of its own; each reads the registry (sale.Catalog, or GET /api/v1/strategies in the
// browser). A list is two or more strategies, by name or by constant, in one slice, array or
// map literal, one switch case, one comma-separated string ("mysql,redis"), or, in JavaScript,
// one file.
func TestNoStrategyListOutsideRegistry(t *testing.T) {
	root := moduleRoot(t)
	names := map[string]bool{}
	for _, st := range sale.Strategies {
		names[string(st)] = true
	}
	consts := strategyConsts(t, filepath.Join(root, registryFile))
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules" || d.Name() == "results") {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case rel == registryFile || strings.HasSuffix(rel, "_test.go") || strings.HasSuffix(rel, ".test.js"):
		case strings.HasSuffix(rel, ".go"):
			for _, v := range goLists(t, path, names, consts, allowedLists[rel]) {
				t.Errorf("%s:%s lists strategies of its own: %s", rel, v.pos, strings.Join(v.names, ", "))
			}
		case strings.HasSuffix(rel, ".js"):
			if found := jsNames(t, path, names); isList(found, len(found)) {
				t.Errorf("%s names strategies of its own: %s", rel, strings.Join(found, ", "))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// moduleRoot is the directory of go.mod above the test's.
func moduleRoot(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// strategyConsts are the names of the registry's constants of type Strategy.
func strategyConsts(tb testing.TB, path string) map[string]bool {
	tb.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if v, ok := n.(*ast.ValueSpec); ok {
			if id, ok := v.Type.(*ast.Ident); ok && id.Name == "Strategy" {
				for _, name := range v.Names {
					out[name.Name] = true
				}
			}
		}
		return true
	})
	if len(out) != len(sale.Strategies) {
		tb.Fatalf("%s declares %d Strategy constants for %d strategies", path, len(out), len(sale.Strategies))
	}
	return out
}

// isList says whether the strategies found in one literal (strs of them as strings, the others
// as constants) make a list: two or more, and not only ambiguous names as strings.
func isList(found []string, strs int) bool {
	if len(found) < 2 {
		return false
	}
	if strs < len(found) {
		return true
	}
	for _, s := range found {
		if !ambiguous[s] {
			return true
		}
	}
	return false
}

type violation struct {
	pos   string
	names []string
}

// goLists finds the lists of strategies in the Go file at path, but for the one of the variable
// allowed (empty: none).
func goLists(tb testing.TB, path string, names, consts map[string]bool, allowed string) []violation {
	tb.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		tb.Fatal(err)
	}
	// strategy says which strategy e names, if any: a string literal, sale.StrategyX, or (in
	// package sale) StrategyX.
	strategy := func(e ast.Expr) string {
		switch e := e.(type) {
		case *ast.BasicLit:
			if s, err := strconv.Unquote(e.Value); err == nil && e.Kind == token.STRING && names[s] {
				return s
			}
		case *ast.SelectorExpr:
			if x, ok := e.X.(*ast.Ident); ok && x.Name == "sale" && consts[e.Sel.Name] {
				return e.Sel.Name
			}
		case *ast.Ident:
			if f.Name.Name == "sale" && consts[e.Name] {
				return e.Name
			}
		}
		return ""
	}
	var out []violation
	report := func(n ast.Node, exprs []ast.Expr) {
		var found []string
		strs := 0
		for _, e := range exprs {
			if s := strategy(e); s != "" && !slices.Contains(found, s) {
				found = append(found, s)
				if _, lit := e.(*ast.BasicLit); lit {
					strs++
				}
			}
		}
		if isList(found, strs) {
			out = append(out, violation{fset.Position(n.Pos()).String()[len(fset.Position(n.Pos()).Filename)+1:], found})
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.ValueSpec:
			for _, name := range n.Names {
				if allowed != "" && name.Name == allowed {
					return false
				}
			}
		case *ast.AssignStmt:
			for _, e := range n.Lhs {
				if id, ok := e.(*ast.Ident); ok && allowed != "" && id.Name == allowed {
					return false
				}
			}
		case *ast.CompositeLit:
			var exprs []ast.Expr
			for _, e := range n.Elts {
				if kv, ok := e.(*ast.KeyValueExpr); ok {
					exprs = append(exprs, kv.Key)
					continue
				}
				exprs = append(exprs, e)
			}
			report(n, exprs)
		case *ast.CaseClause:
			report(n, n.List)
		case *ast.BasicLit:
			if s, err := strconv.Unquote(n.Value); err == nil && n.Kind == token.STRING && strings.Contains(s, ",") {
				var exprs []ast.Expr
				for _, part := range strings.Split(s, ",") {
					exprs = append(exprs, &ast.BasicLit{Kind: token.STRING, Value: strconv.Quote(strings.TrimSpace(part))})
				}
				report(n, exprs)
			}
		}
		return true
	})
	return out
}

// jsString is a quoted JavaScript string without escapes or interpolation.
var jsString = regexp.MustCompile(`'([a-z0-9-]+)'|"([a-z0-9-]+)"|` + "`([a-z0-9-]+)`")

// jsNames are the strategies the JavaScript file at path names in string literals.
func jsNames(tb testing.TB, path string, names map[string]bool) []string {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	var found []string
	for _, m := range jsString.FindAllStringSubmatch(string(b), -1) {
		s := m[1] + m[2] + m[3]
		if names[s] && !slices.Contains(found, s) {
			found = append(found, s)
		}
	}
	return found
}

// TestTheRegistryRuleCatches: the rule sees planted lists as lists — by name in a slice, by
// constant in a map, in a switch case, in one comma-separated string, in a JavaScript file — and
// lets through one strategy alone, the allowed table, and the ambiguous names alone.
func TestTheRegistryRuleCatches(t *testing.T) {
	names := map[string]bool{}
	for _, st := range sale.Strategies {
		names[string(st)] = true
	}
	consts := strategyConsts(t, filepath.Join(moduleRoot(t), registryFile))
	dir := t.TempDir()
	goFile := filepath.Join(dir, "planted.go")
	src := `package planted

import "github.com/seckill-go/seckill-go/internal/sale"

var bySlice = []string{"redis-lua", "zk-herd"}
var byConst = map[sale.Strategy]int{sale.StrategyRedisLua: 1, sale.StrategyZK: 2}
var flags = "redis-lua,redlock"

func kind(s string) int {
	switch s {
	case "memcached", "redlock":
		return 1
	}
	return 0
}

var one = []string{"redis-lua"}
var services = []string{"mysql", "redis", "zk"}
var allowedTable = []string{"redis-lua", "redlock"}
`
	if err := os.WriteFile(goFile, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got := goLists(t, goFile, names, consts, "allowedTable")
	var lines []int
	for _, v := range got {
		line, _, _ := strings.Cut(v.pos, ":")
		n, _ := strconv.Atoi(line)
		lines = append(lines, n)
	}
	if want := []int{5, 6, 7, 11}; !slices.Equal(lines, want) {
		t.Errorf("planted lists found on lines %v, want %v (%+v)", lines, want, got)
	}
	jsFile := filepath.Join(dir, "planted.js")
	if err := os.WriteFile(jsFile, []byte(`const fallback = ["redis-lua", "zk-reentrant"];`), 0o644); err != nil {
		t.Fatal(err)
	}
	if found := jsNames(t, jsFile, names); !isList(found, len(found)) {
		t.Errorf("planted JavaScript list not found: %v", found)
	}
}
