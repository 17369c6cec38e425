package payment_test

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/seckill-go/seckill-go/internal/checkout"
	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/payment"
)

var t0 = time.Date(2026, 11, 26, 12, 0, 0, 123456789, time.UTC)

// fixedRand is an injectable Rand whose draws the test sets.
type fixedRand struct{ bits atomic.Uint64 }

func newRand(v float64) *fixedRand {
	r := &fixedRand{}
	r.set(v)
	return r
}

func (r *fixedRand) set(v float64)    { r.bits.Store(math.Float64bits(v)) }
func (r *fixedRand) Float64() float64 { return math.Float64frombits(r.bits.Load()) }

// testDB is a fresh migrated database of this test's own.
func testDB(tb testing.TB) *sql.DB {
	tb.Helper()
	st, _ := itest.Store(tb)
	return st.DB()
}

func newProvider(tb testing.TB, db *sql.DB, o payment.Options) *payment.Provider {
	tb.Helper()
	if o.Now == nil {
		o.Now = func() time.Time { return t0 }
	}
	p, err := payment.New(db, o)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// rows counts the ledger's rows for key.
func rows(tb testing.TB, db *sql.DB, key string) int {
	tb.Helper()
	var n int
	if err := db.QueryRowContext(tb.Context(), "SELECT COUNT(*) FROM payment_charges WHERE charge_key = ?", key).Scan(&n); err != nil {
		tb.Fatal(err)
	}
	return n
}

func request(key string) checkout.ChargeRequest {
	return checkout.ChargeRequest{Key: key, OrderID: "o-" + key, ProductID: 7, AmountCents: 1999}
}

// want is the charge r should have recorded with outcome; its ID is compared apart (random).
func want(r checkout.ChargeRequest, outcome checkout.Outcome) checkout.Charge {
	return checkout.Charge{Key: r.Key, OrderID: r.OrderID, ProductID: r.ProductID, AmountCents: r.AmountCents,
		Outcome: outcome, CreatedAt: t0.Truncate(time.Microsecond)}
}

var ignoreID = cmpopts.IgnoreFields(checkout.Charge{}, "ID")

func TestChargeOutcome(t *testing.T) {
	t.Parallel()
	db := testDB(t)
	for _, tc := range []struct {
		name        string
		failureRate float64
		draw        float64
		want        checkout.Outcome
	}{
		{"draw above rate", 0.5, 0.7, checkout.Succeeded},
		{"draw below rate", 0.5, 0.3, checkout.Declined},
		{"draw equals rate", 0.5, 0.5, checkout.Succeeded},
		{"rate 0", 0, 0, checkout.Succeeded},
		{"rate 1", 1, 0.999999, checkout.Declined},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProvider(t, db, payment.Options{Latency: time.Millisecond, FailureRate: tc.failureRate, Rand: newRand(tc.draw).Float64})
			r := request(strings.ReplaceAll(tc.name, " ", "-"))
			got, err := p.Charge(t.Context(), r)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want(r, tc.want), got, ignoreID); diff != "" {
				t.Errorf("Charge (-want +got):\n%s", diff)
			}
			if !strings.HasPrefix(got.ID, "ch_") || len(got.ID) != 27 {
				t.Errorf("ID = %q, want ch_ and 24 hex digits", got.ID)
			}
			if got.Succeeded() != (tc.want == checkout.Succeeded) {
				t.Errorf("Succeeded() = %v for outcome %s", got.Succeeded(), got.Outcome)
			}
			looked, ok, err := p.Lookup(t.Context(), r.Key)
			if err != nil || !ok {
				t.Fatalf("Lookup = %v, %v", ok, err)
			}
			if diff := cmp.Diff(got, looked); diff != "" {
				t.Errorf("Lookup (-Charge +Lookup):\n%s", diff)
			}
		})
	}
}

// TestChargeReplay: a key charged once returns its first outcome, whatever the provider would
// decide now, without a second row.
func TestChargeReplay(t *testing.T) {
	t.Parallel()
	db := testDB(t)
	for _, first := range []checkout.Outcome{checkout.Succeeded, checkout.Declined} {
		t.Run(string(first), func(t *testing.T) {
			rnd := newRand(0.9)
			if first == checkout.Declined {
				rnd.set(0.1)
			}
			p := newProvider(t, db, payment.Options{FailureRate: 0.5, Rand: rnd.Float64})
			r := request("replay-" + string(first))
			c1, err := p.Charge(t.Context(), r)
			if err != nil {
				t.Fatal(err)
			}
			if c1.Outcome != first {
				t.Fatalf("first outcome %s, want %s", c1.Outcome, first)
			}
			rnd.set(1 - rnd.Float64()) // the provider would now decide the other way
			c2, err := p.Charge(t.Context(), r)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c1, c2); diff != "" {
				t.Errorf("replay (-first +replay):\n%s", diff)
			}
			if n := rows(t, db, r.Key); n != 1 {
				t.Errorf("%d rows for the key, want 1", n)
			}
		})
	}
}

// TestChargeConcurrent: callers racing on one key (all past the lookup, all waiting the latency
// together) record one row and all get its outcome.
func TestChargeConcurrent(t *testing.T) {
	t.Parallel()
	db := testDB(t)
	var draws atomic.Int64 // two per caller that found the key free and went to the provider
	p := newProvider(t, db, payment.Options{Latency: 20 * time.Millisecond, FailureRate: 0.5, Now: time.Now,
		Rand: func() float64 { draws.Add(1); return rand.Float64() }})
	const callers = 24
	for k := range 5 {
		r := request("race-" + string(rune('a'+k)))
		draws.Store(0)
		got := make([]checkout.Charge, callers)
		var wg sync.WaitGroup
		for i := range callers {
			wg.Go(func() {
				c, err := p.Charge(t.Context(), r)
				if err != nil {
					t.Error(err)
				}
				got[i] = c
			})
		}
		wg.Wait()
		for i := range got {
			if diff := cmp.Diff(got[0], got[i]); diff != "" {
				t.Errorf("key %s: caller %d (-caller 0 +caller %d):\n%s", r.Key, i, i, diff)
			}
		}
		if n := rows(t, db, r.Key); n != 1 {
			t.Errorf("key %s: %d rows, want 1", r.Key, n)
		}
		t.Logf("key %s: %d of %d callers raced to the provider", r.Key, draws.Load()/2, callers)
		if d := draws.Load(); d < 4 {
			t.Errorf("key %s: only %d caller(s) went to the provider: no race on the INSERT", r.Key, d/2)
		}
	}
}

// TestChargeCancelled: a charge whose ctx ends before the provider answers returns ctx's error
// and records nothing, so that a retry is a new charge.
func TestChargeCancelled(t *testing.T) {
	t.Parallel()
	db := testDB(t)
	p := newProvider(t, db, payment.Options{Latency: 10 * time.Second, Rand: newRand(0.5).Float64})

	r := request("cancelled-during-wait")
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := p.Charge(ctx, r); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Charge = %v, want context.DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Charge returned after %s: it did not watch ctx", took)
	}
	if n := rows(t, db, r.Key); n != 0 {
		t.Errorf("%d rows, want 0", n)
	}

	r = request("cancelled-before")
	ctx, cancel = context.WithCancel(t.Context())
	cancel()
	if _, err := p.Charge(ctx, r); !errors.Is(err, context.Canceled) {
		t.Errorf("Charge = %v, want context.Canceled", err)
	}
	if n := rows(t, db, r.Key); n != 0 {
		t.Errorf("%d rows, want 0", n)
	}
}

// TestVoid: Void settles a key for the recovery of an order left paying: before any charge it
// voids the key for good; after a charge it returns that charge.
func TestVoid(t *testing.T) {
	t.Parallel()
	db := testDB(t)
	rnd := newRand(0.9)
	p := newProvider(t, db, payment.Options{FailureRate: 0.5, Rand: rnd.Float64})
	void := func(t *testing.T, r checkout.ChargeRequest) checkout.Charge {
		t.Helper()
		c, err := p.Void(t.Context(), r.Key, r.OrderID, r.ProductID, r.AmountCents)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	charge := func(t *testing.T, r checkout.ChargeRequest) checkout.Charge {
		t.Helper()
		c, err := p.Charge(t.Context(), r)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	t.Run("before charge", func(t *testing.T) {
		r := request("void-first")
		v := void(t, r)
		if diff := cmp.Diff(want(r, checkout.Voided), v, ignoreID); diff != "" {
			t.Errorf("Void (-want +got):\n%s", diff)
		}
		if c := charge(t, r); c != v {
			t.Errorf("Charge after Void = %+v, want the void %+v", c, v)
		}
		if again := void(t, r); again != v {
			t.Errorf("second Void = %+v, want %+v", again, v)
		}
		if n := rows(t, db, r.Key); n != 1 {
			t.Errorf("%d rows, want 1", n)
		}
	})
	t.Run("after success", func(t *testing.T) {
		r := request("void-after-success")
		c := charge(t, r)
		if !c.Succeeded() {
			t.Fatalf("charge %s, want succeeded", c.Outcome)
		}
		if v := void(t, r); v != c {
			t.Errorf("Void after success = %+v, want the charge %+v", v, c)
		}
	})
	t.Run("after decline", func(t *testing.T) {
		r := request("void-after-decline")
		rnd.set(0.1)
		defer rnd.set(0.9)
		c := charge(t, r)
		if c.Outcome != checkout.Declined {
			t.Fatalf("charge %s, want declined", c.Outcome)
		}
		if v := void(t, r); v != c {
			t.Errorf("Void after decline = %+v, want the charge %+v", v, c)
		}
	})
}

// TestVoidDuringCharge: a Void that lands while a charge waits at the provider wins the key; the
// charge returns Voided and nothing is charged.
func TestVoidDuringCharge(t *testing.T) {
	t.Parallel()
	db := testDB(t)
	// Draws 0.9: the charge waits 1.4 × 500 ms, and would succeed.
	p := newProvider(t, db, payment.Options{Latency: 500 * time.Millisecond, FailureRate: 0.5, Rand: newRand(0.9).Float64})
	r := request("void-during")
	done := make(chan checkout.Charge, 1)
	go func() {
		c, err := p.Charge(t.Context(), r)
		if err != nil {
			t.Error(err)
		}
		done <- c
	}()
	time.Sleep(100 * time.Millisecond)
	v, err := p.Void(t.Context(), r.Key, r.OrderID, r.ProductID, r.AmountCents)
	if err != nil {
		t.Fatal(err)
	}
	if v.Outcome != checkout.Voided {
		t.Fatalf("Void = %s, want voided (did the charge finish within 100 ms?)", v.Outcome)
	}
	if c := <-done; c != v {
		t.Errorf("Charge = %+v, want the void %+v", c, v)
	}
}

func TestKeyMismatch(t *testing.T) {
	t.Parallel()
	db := testDB(t)
	p := newProvider(t, db, payment.Options{})
	r := request("mismatch")
	if _, err := p.Charge(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		change func(*checkout.ChargeRequest)
	}{
		{"order", func(r *checkout.ChargeRequest) { r.OrderID = "another" }},
		{"product", func(r *checkout.ChargeRequest) { r.ProductID++ }},
		{"amount", func(r *checkout.ChargeRequest) { r.AmountCents++ }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			other := r
			tc.change(&other)
			if _, err := p.Charge(t.Context(), other); !errors.Is(err, payment.ErrKeyMismatch) {
				t.Errorf("Charge = %v, want ErrKeyMismatch", err)
			}
			if _, err := p.Void(t.Context(), other.Key, other.OrderID, other.ProductID, other.AmountCents); !errors.Is(err, payment.ErrKeyMismatch) {
				t.Errorf("Void = %v, want ErrKeyMismatch", err)
			}
		})
	}
	if n := rows(t, db, r.Key); n != 1 {
		t.Errorf("%d rows, want 1", n)
	}
}

// lazyDB is a pool that never connects unless used: for the checks made before any query.
func lazyDB(tb testing.TB) *sql.DB {
	tb.Helper()
	connector, err := mysql.NewConnector(mysql.NewConfig())
	if err != nil {
		tb.Fatal(err)
	}
	db := sql.OpenDB(connector)
	tb.Cleanup(func() { db.Close() })
	return db
}

func TestNewRefuses(t *testing.T) {
	db := lazyDB(t)
	for _, tc := range []struct {
		name string
		db   *sql.DB
		o    payment.Options
	}{
		{"no database", nil, payment.Options{}},
		{"negative latency", db, payment.Options{Latency: -time.Millisecond}},
		{"negative failure rate", db, payment.Options{FailureRate: -0.1}},
		{"failure rate above 1", db, payment.Options{FailureRate: 1.1}},
		{"NaN failure rate", db, payment.Options{FailureRate: math.NaN()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := payment.New(tc.db, tc.o); err == nil {
				t.Error("New accepted it")
			}
		})
	}
}

// TestChargeRefuses: values the ledger's columns cannot hold as given are refused before any
// query, not truncated into another key's row.
func TestChargeRefuses(t *testing.T) {
	p, err := payment.New(lazyDB(t), payment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		change func(*checkout.ChargeRequest)
	}{
		{"empty key", func(r *checkout.ChargeRequest) { r.Key = "" }},
		{"long key", func(r *checkout.ChargeRequest) { r.Key = strings.Repeat("k", payment.MaxKeyLen+1) }},
		{"key with space", func(r *checkout.ChargeRequest) { r.Key = "a b" }},
		{"non-ASCII key", func(r *checkout.ChargeRequest) { r.Key = "clé" }},
		{"empty order", func(r *checkout.ChargeRequest) { r.OrderID = "" }},
		{"long order", func(r *checkout.ChargeRequest) { r.OrderID = strings.Repeat("o", payment.MaxOrderIDLen+1) }},
		{"product 0", func(r *checkout.ChargeRequest) { r.ProductID = 0 }},
		{"negative amount", func(r *checkout.ChargeRequest) { r.AmountCents = -1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := request("k")
			tc.change(&r)
			if _, err := p.Charge(t.Context(), r); err == nil {
				t.Error("Charge accepted it")
			}
			if _, err := p.Void(t.Context(), r.Key, r.OrderID, r.ProductID, r.AmountCents); err == nil {
				t.Error("Void accepted it")
			}
		})
	}
	r := request("k")
	r.Key = strings.Repeat("k", payment.MaxKeyLen)
	r.OrderID = strings.Repeat("o", payment.MaxOrderIDLen)
	r.AmountCents = 0
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // valid: it gets as far as the query, which ctx stops
	if _, err := p.Charge(ctx, r); !errors.Is(err, context.Canceled) {
		t.Errorf("Charge of the longest valid values = %v, want context.Canceled", err)
	}
}
