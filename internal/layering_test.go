// Package internal_test holds the rule of the house's layers (issue #30): a domain package says
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
var domain = []string{"sale", "board", "checkout", "order"}

// leaves are the packages (internal/<name>) that import nothing but the standard library, so that
// every package may use them, a domain package included.
var leaves = []string{"pause"}

// forbidden are the imports no domain package may have: the adapters' libraries, the HTTP
// framework, the database/sql layer, and this module's adapters.
var forbidden = []string{
	"github.com/gin-gonic/", "gorm.io/", "github.com/redis/go-redis/", "github.com/go-zookeeper/",
	"github.com/segmentio/kafka-go", "github.com/go-sql-driver/", "github.com/bradfitz/gomemcache",
	"database/sql", "net/http",
	module + "store", module + "stock", module + "lock", module + "httpapi", module + "app",
	module + "redisconn", module + "changefeed", module + "livestats", module + "payment", module + "ratelimit",
}

// pending are the violations known today, each to be removed with its fix (order's domain types
// apart from its Kafka adapter): the test fails when one of them is gone, so that its entry goes
// with it.
var pending = map[string][]string{
	"order": {"github.com/segmentio/kafka-go"},
}

// TestDomainImportsNoAdapter: no domain package imports an adapter, a storage or transport
// library or the HTTP framework, beyond the pending violations listed above.
func TestDomainImportsNoAdapter(t *testing.T) {
	for _, name := range domain {
		imports := importsOf(t, name)
		var got []string
		for _, imp := range imports {
			if isForbidden(imp) {
				got = append(got, imp)
			}
		}
		want := pending[name]
		for _, imp := range got {
			if !slices.Contains(want, imp) {
				t.Errorf("internal/%s imports %s: a domain package imports no adapter (declare an interface it needs and let the adapter satisfy it)", name, imp)
			}
		}
		for _, imp := range want {
			if !slices.Contains(got, imp) {
				t.Errorf("internal/%s no longer imports %s: remove it from pending", name, imp)
			}
		}
	}
}

// TestLeavesImportOnlyTheStandardLibrary: a leaf stays one.
func TestLeavesImportOnlyTheStandardLibrary(t *testing.T) {
	for _, name := range leaves {
		for _, imp := range importsOf(t, name) {
			if first, _, _ := strings.Cut(imp, "/"); strings.Contains(first, ".") {
				t.Errorf("internal/%s imports %s: a leaf imports nothing but the standard library", name, imp)
			}
		}
	}
}

// TestTheRuleCatches: the rule sees a planted violation (an adapter import) as one.
func TestTheRuleCatches(t *testing.T) {
	for _, imp := range []string{module + "store", "gorm.io/gorm", "github.com/redis/go-redis/v9", module + "lock/zklock"} {
		if !isForbidden(imp) {
			t.Errorf("%s is not caught", imp)
		}
	}
	for _, imp := range []string{module + "sale", "context", "log/slog"} {
		if isForbidden(imp) {
			t.Errorf("%s is caught, but is allowed", imp)
		}
	}
}

func isForbidden(imp string) bool {
	for _, f := range forbidden {
		if imp == f || strings.HasPrefix(imp, f) && (strings.HasSuffix(f, "/") || strings.HasPrefix(imp[len(f):], "/")) {
			return true
		}
	}
	return false
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
