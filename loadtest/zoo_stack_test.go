package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/apptest"
	"github.com/seckill-go/seckill-go/internal/sale"
)

// TestZooShort is the lock zoo in small, inside `make test`: every strategy of the catalog through
// the same load over three replicas, without the faults (they stop and kill processes: make zoo
// plays them on the stack of make up). Each must come out as the write-ups say: the safe ones
// whole, `none` oversold, the capped optimistic lock undersold.
func TestZooShort(t *testing.T) {
	stack := apptest.NewStack(t)
	env := map[string]string{"SECKILL_ALLOW_UNSAFE_STRATEGIES": "true"}
	var targets []string
	for range 3 {
		targets = append(targets, stack.Start(t, env).URL)
	}
	o, err := parseOptions([]string{
		"-zoo", "-zoo-faults", "", "-strategies", "all",
		"-targets", strings.Join(targets, ","),
		"-stock", "200", "-buyers", "800", "-workers", "64",
		"-baseline", "500ms", "-drain-timeout", "90s",
		"-admin-token", apptest.AdminToken,
		"-mysql-dsn", stack.DSN,
		"-out", t.TempDir(),
	}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	db, err := openDB(o.mysqlDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	rep, err := runZoo(ctx, db, o, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(zooMarkdown(rep))
	if _, err := writeZooReport(o.outDir, rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != len(sale.Catalog) {
		t.Errorf("%d rows for %d strategies of the catalog", len(rep.Rows), len(sale.Catalog))
	}
	for _, row := range rep.Rows {
		if !row.Load.ok() {
			t.Errorf("%s: %s, want %s: %s %q", row.Strategy, row.Load.Outcome, row.Load.Expected, row.Load.Detail, row.Load.Violations)
		}
		if len(row.Faults) > 0 {
			t.Errorf("%s: faults played without -zoo-faults", row.Strategy)
		}
	}
}
