package app

import (
	"fmt"
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
		summary = append(summary, fmt.Sprintf("%s %d open=%v listed=%v", p.Strategy, p.Stock, !p.SaleStartsAt.After(now), p.Listed))
	}
	want := []string{"mysql 100 open=true listed=true", "redis 100 open=true listed=true", "mysql 100 open=false listed=true"}
	if diff := cmp.Diff(want, summary); diff != "" {
		t.Fatalf("demo products (-want +got):\n%s", diff)
	}
}

// TestServedStrategies: one table says which strategies a configuration serves: the safe ones,
// and the unsafe ones only when allowed, in catalog order, each table entry unsafe exactly when
// the catalog says so. (The zoo's strategies join the table as they are built: the test takes
// the catalog's order and safety from sale.Catalog, and which strategies exist from the table.)
func TestServedStrategies(t *testing.T) {
	inTable := map[sale.Strategy]bool{}
	for _, d := range strategyTable {
		inTable[d.strategy] = true
		if d.unsafe == d.strategy.Safe() {
			t.Errorf("%s: unsafe = %v in the table, but the catalog says safe = %v", d.strategy, d.unsafe, d.strategy.Safe())
		}
	}
	var safe, all []sale.Strategy
	for _, st := range sale.Strategies {
		if !inTable[st] {
			continue
		}
		all = append(all, st)
		if st.Safe() {
			safe = append(safe, st)
		}
	}
	if len(all) != len(strategyTable) {
		t.Errorf("the table has %d entries, %d of them strategies of the catalog", len(strategyTable), len(all))
	}
	cfg := &config.Config{}
	if diff := cmp.Diff(safe, servedStrategies(cfg)); diff != "" {
		t.Errorf("safe only (-want +got):\n%s", diff)
	}
	cfg.Sale.AllowUnsafe = true
	if diff := cmp.Diff(all, servedStrategies(cfg)); diff != "" {
		t.Errorf("with the unsafe ones (-want +got):\n%s", diff)
	}
	for _, st := range []sale.Strategy{sale.StrategyMySQL, sale.StrategyRedis, sale.StrategyZK, sale.StrategyRedisLua, sale.StrategyNone} {
		if !inTable[st] {
			t.Errorf("%s is not in the table", st)
		}
	}
}
