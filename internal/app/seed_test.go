package app

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/seckill-go/seckill-go/internal/config"
	"github.com/seckill-go/seckill-go/internal/sale"
)

func TestDemoProducts(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	got := demoProducts(now, []sale.Strategy{sale.StrategyMySQL, sale.StrategyRedis})
	var summary []string
	for _, p := range got {
		if err := p.Validate(); err != nil {
			t.Errorf("%s: %v", p.Name, err)
		}
		summary = append(summary, fmt.Sprintf("%s %d open=%v listed=%v admission=%s", p.Strategy, p.Stock, !p.SaleStartsAt.After(now), p.Listed, p.Admission.Mode))
	}
	want := []string{"mysql 100 open=true listed=true admission=open", "redis 100 open=true listed=true admission=open",
		"mysql 100 open=false listed=true admission=open"}
	if diff := cmp.Diff(want, summary); diff != "" {
		t.Fatalf("demo products (-want +got):\n%s", diff)
	}
}

// TestServedStrategies: a configuration serves the unsafe strategies only when it allows them, and
// lists what it serves in the catalog's order (the seed's, so the storefront's), whatever the
// order of strategyTable.
func TestServedStrategies(t *testing.T) {
	built := map[sale.Strategy]bool{}
	for _, d := range strategyTable {
		built[d.strategy] = true
	}
	var safe, all []sale.Strategy
	for _, s := range sale.Strategies {
		if built[s] {
			all = append(all, s)
			if s.Safe() {
				safe = append(safe, s)
			}
		}
	}
	// The project's own strategies are built on every branch of the zoo.
	for _, s := range []sale.Strategy{sale.StrategyMySQL, sale.StrategyRedis, sale.StrategyZK, sale.StrategyRedisLua} {
		if !slices.Contains(safe, s) {
			t.Errorf("%s is not served by default", s)
		}
	}
	if slices.Contains(safe, sale.StrategyNone) || !slices.Contains(all, sale.StrategyNone) {
		t.Errorf("none: served by default %t, with the unsafe ones %t; want false, true", slices.Contains(safe, sale.StrategyNone), slices.Contains(all, sale.StrategyNone))
	}

	reversed := slices.Clone(strategyTable)
	slices.Reverse(reversed)
	for _, tc := range []struct {
		name   string
		table  []strategyDef
		unsafe bool
		want   []sale.Strategy
	}{
		{"safe only", strategyTable, false, safe},
		{"with the unsafe ones", strategyTable, true, all},
		{"a table out of order, safe only", reversed, false, safe},
		{"a table out of order, with the unsafe ones", reversed, true, all},
	} {
		t.Run(tc.name, func(t *testing.T) {
			saved := strategyTable
			strategyTable = tc.table
			t.Cleanup(func() { strategyTable = saved })
			cfg := &config.Config{}
			cfg.Sale.AllowUnsafe = tc.unsafe
			if diff := cmp.Diff(tc.want, servedStrategies(cfg)); diff != "" {
				t.Errorf("served (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStrategyTableMatchesCatalog: the program builds every strategy of the catalog (which the
// storefront and GET /api/v1/strategies describe, and whose Safe decides what is served), once,
// and nothing else.
func TestStrategyTableMatchesCatalog(t *testing.T) {
	seen := map[sale.Strategy]bool{}
	for _, d := range strategyTable {
		if _, ok := d.strategy.Info(); !ok {
			t.Errorf("%s is built but not in sale.Catalog", d.strategy)
		}
		if seen[d.strategy] {
			t.Errorf("%s is in strategyTable twice", d.strategy)
		}
		seen[d.strategy] = true
	}
	for _, st := range sale.Strategies {
		if !seen[st] {
			t.Errorf("%s is in sale.Catalog but not built", st)
		}
	}
}
