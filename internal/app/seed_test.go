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

// TestServedStrategies: one table says which strategies a configuration serves.
func TestServedStrategies(t *testing.T) {
	cfg := &config.Config{}
	if diff := cmp.Diff([]sale.Strategy{sale.StrategyMySQL, sale.StrategyRedis, sale.StrategyZK, sale.StrategyRedisLua, sale.StrategyMySQLLockTable}, servedStrategies(cfg)); diff != "" {
		t.Errorf("safe only (-want +got):\n%s", diff)
	}
	cfg.Sale.AllowUnsafe = true
	if diff := cmp.Diff(sale.Strategies, servedStrategies(cfg)); diff != "" {
		t.Errorf("with the unsafe ones (-want +got):\n%s", diff)
	}
}
