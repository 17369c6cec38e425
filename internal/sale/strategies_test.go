package sale_test

import (
	"testing"

	"github.com/seckill-go/seckill-go/internal/sale"
)

// TestCatalogEntries: every entry of the strategy registry is whole and consistent with itself.
func TestCatalogEntries(t *testing.T) {
	families := map[string]bool{"mysql": true, "redis": true, "zookeeper": true, "memcached": true, "control": true}
	outcomes := map[sale.Outcome]bool{sale.OutcomePass: true, sale.OutcomeOversold: true, sale.OutcomeUndersold: true, sale.OutcomeStall: true}
	seen := map[sale.Strategy]bool{}
	for _, c := range sale.Catalog {
		if c.Strategy == "" || seen[c.Strategy] {
			t.Errorf("%q: empty or listed twice", c.Strategy)
		}
		seen[c.Strategy] = true
		if !families[c.Family] {
			t.Errorf("%s: family %q is none of the known ones", c.Strategy, c.Family)
		}
		if c.Summary == "" {
			t.Errorf("%s: no summary", c.Strategy)
		}
		if !outcomes[c.Load] {
			t.Errorf("%s: load outcome %q", c.Strategy, c.Load)
		}
		// A safe strategy passes its load; an unsafe one is kept to show a failure, under the
		// load or under a fault.
		failure := c.Load != sale.OutcomePass
		for f, o := range c.Faults {
			if !outcomes[o] {
				t.Errorf("%s: %s outcome %q", c.Strategy, f, o)
			}
			failure = failure || o != sale.OutcomePass
		}
		if c.Safe == failure {
			t.Errorf("%s: safe %t, but expected to fail: %t", c.Strategy, c.Safe, failure)
		}
		// The zoo's faults happen while a lock is held: a strategy without one has none.
		if c.Lock == sale.LockNone && len(c.Faults) > 0 {
			t.Errorf("%s: takes no lock but expects faults %v", c.Strategy, c.Faults)
		}
		if c.Lock != sale.LockNone && len(c.Faults) == 0 {
			t.Errorf("%s: takes a lock but expects no fault", c.Strategy)
		}
	}
	if got := len(sale.Strategies); got != len(sale.Catalog) {
		t.Errorf("Strategies has %d names for %d entries", got, len(sale.Catalog))
	}
}
