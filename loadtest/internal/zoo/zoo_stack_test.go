package zoo

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/loadtest/internal/stacktest"
)

// TestZooShort is the lock zoo in small, inside `make test`: every strategy of the catalog through
// the same load over three replicas, without the faults (they stop and kill processes: make zoo
// plays them on the stack of make up). Each must come out as the write-ups say: the safe ones
// whole, `none` oversold, the capped optimistic lock undersold.
func TestZooShort(t *testing.T) {
	args, db := stacktest.ThreeReplicas(t, "-zoo", "-zoo-faults", "", "-strategies", "all",
		"-stock", "200", "-buyers", "800", "-workers", "64")
	o, err := Parse(args, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	rep, err := Run(ctx, db, o, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(Markdown(rep))
	if _, err := WriteReport(o.OutDir, rep); err != nil {
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
