package redislua

import (
	"bytes"
	"context"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/audit"
	"github.com/seckill-go/seckill-go/internal/sale"
)

// TestRefusedOnceAcrossACrash: a persister that refused a lagging state's purchase (MySQL had
// given its unit away) and died after its commit, before acknowledging the entry, leaves the
// refused order in MySQL and the entry pending. The persister that takes the entry over finds the
// order refused already: it writes, counts and logs nothing more, and the refused order stays the
// buyer's one answer. Each refused order id is logged once in all.
func TestRefusedOnceAcrossACrash(t *testing.T) {
	ctx := t.Context()
	s, rdb, st, p := saleInMySQL(t, 2)
	k := s.Keys(p.ID)
	buy(t, s, p, 1) // buyer0
	snapshot := map[string]string{}
	for _, key := range []string{k.State, k.Buyers, k.Stream} {
		v, err := rdb.Dump(ctx, key).Result()
		if err != nil {
			t.Fatalf("DUMP %s: %v", key, err)
		}
		snapshot[key] = v
	}
	if o, err := s.Purchase(ctx, p.ID, Attempt{Epoch: p.Epoch, UserID: "buyer1", Quantity: 1, OrderID: "o-buyer1"}); err != nil || o.Result != Accepted {
		t.Fatalf("buyer1: %v %v", o.Result, err)
	}
	if _, err := persister(t, rdb, s, st, "a", 0).Drain(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	for key, v := range snapshot { // a failover to a replica one purchase behind
		if err := rdb.RestoreReplace(ctx, key, 0, v).Err(); err != nil {
			t.Fatalf("RESTORE %s: %v", key, err)
		}
	}
	if o, err := s.Purchase(ctx, p.ID, Attempt{Epoch: p.Epoch, UserID: "late", Quantity: 1, OrderID: "o-late"}); err != nil || o.Result != Accepted {
		t.Fatalf("the lagging state's sale: %v %v; want accepted", o.Result, err)
	}

	var deadLog, otherLog bytes.Buffer
	dead, err := NewPersister(rdb, s, st, PersisterOptions{Consumer: "dead", AfterCommit: runtime.Goexit,
		Log: slog.New(slog.NewJSONHandler(&deadLog, nil))})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = dead.Drain(context.Background(), p.ID)
	}()
	<-done
	if o, err := st.BuyerOrder(ctx, "o-late", "late"); err != nil || o.Status != sale.StatusRefused || o.Refusal != sale.CodeSoldOut {
		t.Fatalf("after the dead persister's commit: %+v, %v; want late's order refused, sold_out", o, err)
	}
	// The replica's stream still held buyer0's entry (written already): both are pending.
	if pending, _ := rdb.XPending(ctx, k.Stream, "persisters").Result(); pending.Count != 2 {
		t.Fatalf("%d entries pending, want the dead persister's two", pending.Count)
	}

	time.Sleep(2 * time.Millisecond) // XAUTOCLAIM's idle time is in milliseconds
	other, err := NewPersister(rdb, s, st, PersisterOptions{Consumer: "other", ClaimAfter: time.Millisecond,
		Log: slog.New(slog.NewJSONHandler(&otherLog, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := other.Drain(ctx, p.ID); err != nil || n != 2 {
		t.Fatalf("the other persister settled %d, %v; want the two entries", n, err)
	}
	if dead.Refused() != 1 || other.Refused() != 0 {
		t.Errorf("refused: the dead persister %d, the other %d; want 1 and 0", dead.Refused(), other.Refused())
	}
	if n := strings.Count(deadLog.String()+otherLog.String(), `"o-late"`); n != 1 {
		t.Errorf("o-late logged %d times, want once; the logs:\n%s%s", n, deadLog.String(), otherLog.String())
	}
	f, err := audit.Load(ctx, st.DB(), p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if f.Refused != 1 || f.Reservations != 2 || f.Stock != 0 || len(f.Violations(false)) != 0 {
		t.Fatalf("audit %+v, violations %q; want 2 reserved, 1 refused, stock 0, sound", f, f.Violations(false))
	}
}
