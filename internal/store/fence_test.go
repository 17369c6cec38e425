package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/store"
)

// fenceStep is one claim or one fenced write of a product's fence, by a holder whose token was
// counted by issuer: "old" and "new" stand for two ZooKeeper ensembles' data, first seen in the
// order the steps name them (the new one after a wipe, its czxids counted from zero again); ""
// is a lock whose tokens carry no issuer.
type fenceStep struct {
	write   bool // SetStockFenced, else ClaimFence
	issuer  string
	token   uint64
	refused bool
}

func claim(issuer string, token uint64, refused bool) fenceStep {
	return fenceStep{issuer: issuer, token: token, refused: refused}
}

func write(issuer string, token uint64, refused bool) fenceStep {
	return fenceStep{write: true, issuer: issuer, token: token, refused: refused}
}

// TestFenceIssuers plays the fence's rule with both orders of claims: tokens of one issuer
// compare as numbers; a later issuer's first claim moves the fence onto it whatever its token,
// and from then on the earlier issuer's holders are refused, at the claim and at the write of a
// pair claimed before; the fence never goes back to an issuer it left. The control is the rule
// without issuers, which refuses the new ensemble's low tokens: what every purchase of a zk
// product met after a wiped ensemble.
func TestFenceIssuers(t *testing.T) {
	itest.Integration(t)
	st, _ := itest.Store(t)
	const high = 0x5_0000_1000 // a czxid of an ensemble that has elected leaders five times
	for _, tc := range []struct {
		name string
		// claimed, if set, is the fence a row claimed before issuers were recorded.
		claimed uint64
		steps   []fenceStep
	}{
		{"one issuer: tokens compare", 0, []fenceStep{
			claim("old", 10, false), claim("old", 5, true), claim("old", 10, true),
			claim("old", 11, false), write("old", 10, true), write("old", 11, false),
		}},
		{"new ensemble after the old holder claimed: the old write is refused", 0, []fenceStep{
			claim("old", high, false), claim("new", 3, false), write("old", high, true), write("new", 3, false),
		}},
		{"old holder claims after the re-base: refused", 0, []fenceStep{
			claim("old", high, false), claim("new", 3, false), claim("old", high+1, true), write("new", 3, false),
		}},
		{"both ensembles answer: never back to the old one", 0, []fenceStep{
			claim("old", 10, false), claim("new", 3, false), claim("old", 1<<62, true),
			claim("new", 4, false), claim("old", 1<<62+1, true), write("new", 4, false),
		}},
		{"equal tokens of two ensembles: the write compares the issuer too", 0, []fenceStep{
			claim("old", 3, false), claim("new", 3, false), write("old", 3, true), write("new", 3, false),
		}},
		{"a holder of the new data that is stale is refused as before", 0, []fenceStep{
			claim("old", high, false), claim("new", 3, false), claim("new", 5, false), write("new", 3, true),
		}},
		{"a fence claimed before issuers were recorded adopts the first issuer", high, []fenceStep{
			claim("new", 3, false), claim("", high+1, true), write("new", 3, false),
		}},
		{"control: without issuers the new ensemble's tokens are refused", 0, []fenceStep{
			claim("", high, false), claim("", 3, true), claim("", 4, true), write("", high, false),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := product(t, st, 100, sale.StrategyZK)
			if tc.claimed > 0 {
				if _, err := st.DB().ExecContext(t.Context(), "UPDATE products SET fence_token = ? WHERE id = ?", tc.claimed, p.ID); err != nil {
					t.Fatal(err)
				}
			}
			// Issuers are named per case: each case's "old" is first seen before its "new".
			suffix := "-" + itest.Suffix(8)
			for i, s := range tc.steps {
				f := store.Fence{Token: s.token}
				if s.issuer != "" {
					f.Issuer = "zk:" + s.issuer + suffix
				}
				err := fenceStepRun(t.Context(), st, p, s.write, f)
				what := fmt.Sprintf("step %d: %s by %q with token %#x", i+1, map[bool]string{false: "claim", true: "write"}[s.write], s.issuer, s.token)
				switch {
				case s.refused && !errors.Is(err, sale.ErrFenced):
					t.Fatalf("%s = %v, want refused (%v)", what, err, sale.ErrFenced)
				case !s.refused && err != nil:
					t.Fatalf("%s = %v, want accepted", what, err)
				}
			}
		})
	}
}

func fenceStepRun(ctx context.Context, st *store.Store, p sale.Product, write bool, f store.Fence) error {
	if !write {
		return st.ClaimFence(ctx, p.ID, p.Strategy, p.Epoch, f)
	}
	return st.Purchase(ctx, func(ctx context.Context, tx *store.PurchaseTx) error {
		stock, err := tx.Stock(ctx, p.ID, p.Strategy, p.Epoch)
		if err != nil {
			return err
		}
		return tx.SetStockFenced(ctx, p.ID, p.Strategy, p.Epoch, f, stock-1)
	})
}

// TestResetForgetsFenceIssuer: an admin reset starts the fence afresh, issuer included, so the
// next sale may be sold under any lock service.
func TestResetForgetsFenceIssuer(t *testing.T) {
	itest.Integration(t)
	st, _ := itest.Store(t)
	p := product(t, st, 10, sale.StrategyZK)
	later := store.Fence{Issuer: "zk:later-" + itest.Suffix(8), Token: 1 << 40}
	if err := st.ClaimFence(t.Context(), p.ID, p.Strategy, p.Epoch, store.Fence{Issuer: "zk:earlier-" + itest.Suffix(8), Token: 1}); err != nil {
		t.Fatal(err)
	}
	if err := st.ClaimFence(t.Context(), p.ID, p.Strategy, p.Epoch, later); err != nil {
		t.Fatal(err)
	}
	r, err := st.ResetProduct(t.Context(), p.ID, sale.Reset{Stock: 10, Strategy: sale.StrategyRedis}, time.Now().UTC())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.ClaimFence(t.Context(), r.ID, r.Strategy, r.Epoch, store.Fence{Token: 5}); err != nil {
		t.Fatalf("a redis token after the reset = %v, want accepted", err)
	}
}
