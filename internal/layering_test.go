// Package internal_test holds the rule of the house's layers: a domain package says
// what a flash sale is and never how it is stored, locked or carried, so that it reads alone and
// every adapter can be swapped under it.
package internal_test

import (
	"go/build"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/seckill-go/seckill-go/internal/"

// domain are the domain packages (internal/<name>): what they may import besides each other, the
// standard library and the leaves is nothing.
var domain = []string{"sale", "board", "checkout", "order", "waitroom"}

// leaves are the packages (internal/<name>) that import nothing but the standard library, so that
// every package may use them, a domain package included.
var leaves = []string{"pause"}

// TestDomainImportsNoAdapter: a domain package imports the standard library, other domain
// packages and the leaves, and nothing else: no adapter of this module, no storage or transport
// library, no HTTP framework. A domain package that needs an adapter declares an interface (a
// port) and lets the adapter satisfy it, as checkout's Provider does for internal/payment.
func TestDomainImportsNoAdapter(t *testing.T) {
	for _, name := range domain {
		for _, imp := range importsOf(t, name) {
			if !domainMayImport(imp) {
				t.Errorf("internal/%s imports %s: a domain package imports no adapter (declare an interface it needs and let the adapter satisfy it)", name, imp)
			}
		}
	}
}

// domainMayImport reports whether a domain package may import imp.
func domainMayImport(imp string) bool {
	if standard(imp) {
		return !slices.Contains(adapterStd, imp)
	}
	rest, ok := strings.CutPrefix(imp, module)
	return ok && (slices.Contains(domain, rest) || slices.Contains(leaves, rest))
}

// adapterStd are the standard library's adapters: a domain package neither queries a database
// nor serves HTTP.
var adapterStd = []string{"database/sql", "net/http"}

// standard reports whether imp is a package of the standard library (no dot in its first element).
func standard(imp string) bool {
	first, _, _ := strings.Cut(imp, "/")
	return !strings.Contains(first, ".")
}

// TestLeavesImportOnlyTheStandardLibrary: a leaf stays one.
func TestLeavesImportOnlyTheStandardLibrary(t *testing.T) {
	for _, name := range leaves {
		for _, imp := range importsOf(t, name) {
			if !standard(imp) {
				t.Errorf("internal/%s imports %s: a leaf imports nothing but the standard library", name, imp)
			}
		}
	}
}

// TestTheRuleCatches: the rule sees a planted violation (an adapter import) as one, and lets
// the standard library, the domain and the leaves through.
func TestTheRuleCatches(t *testing.T) {
	for _, imp := range []string{module + "store", "gorm.io/gorm", "github.com/redis/go-redis/v9",
		module + "lock/zklock", module + "orderqueue", "github.com/segmentio/kafka-go", "database/sql", "net/http"} {
		if domainMayImport(imp) {
			t.Errorf("%s is not caught", imp)
		}
	}
	for _, imp := range []string{module + "sale", module + "order", module + "pause", "context", "log/slog", "net/netip"} {
		if !domainMayImport(imp) {
			t.Errorf("%s is caught, but is allowed", imp)
		}
	}
}

// importsOf lists the imports of internal/<name>'s non-test files.
func importsOf(t *testing.T, name string) []string {
	t.Helper()
	p, err := build.Default.ImportDir(filepath.Join(".", name), 0)
	if err != nil {
		t.Fatalf("internal/%s: %v", name, err)
	}
	return p.Imports
}
