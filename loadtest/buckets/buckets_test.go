package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/seckill-go/seckill-go/internal/itest"
)

// stores opens both backends on the test's own database and key prefix, removed at the end.
func stores(t *testing.T) []backend {
	t.Helper()
	itest.Integration(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	database := "seckill_buckets_it_" + itest.Suffix(8)
	m, err := openMySQL(ctx, itest.ServerDSN, database, 64)
	if err != nil {
		t.Fatalf("MySQL (start the services with `make services`): %v", err)
	}
	t.Cleanup(func() {
		m.Close()
		if err := dropMySQL(context.Background(), itest.ServerDSN, database); err != nil {
			t.Logf("drop %s: %v", database, err)
		}
	})
	r, err := openRedis(ctx, itest.RedisAddr, "", "seckill:buckets:it:"+itest.Suffix(8)+":", 64)
	if err != nil {
		t.Fatalf("Redis (start the services with `make services`): %v", err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Logf("delete the test's keys: %v", err)
		}
	})
	return []backend{m, r}
}

// tail is a small sale: 300 units in 4 buckets, 450 buyers, 32 in flight.
func tail(policy, arrival string) tailConfig {
	return tailConfig{Policy: policy, Arrival: arrival, K: 4, Units: 300, Buyers: 450, Workers: 32, Replicas: 3, Skew: 1, Seed: 1}
}

func runTailT(t *testing.T, be backend, c tailConfig) TailRow {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	row, err := runTail(ctx, be, c)
	if err != nil {
		t.Fatal(err)
	}
	return row
}

// TestTailNeverOversells runs every policy on both stores and both arrivals: the units sold never
// exceed N, and the buyers' count agrees with what the buckets lost. Every policy but pinned
// sells exactly N.
func TestTailNeverOversells(t *testing.T) {
	for _, be := range stores(t) {
		for _, arrival := range allArrivals {
			for _, policy := range allPolicies {
				t.Run(be.Name()+"/"+arrival+"/"+policy, func(t *testing.T) {
					t.Parallel()
					row := runTailT(t, be, tail(policy, arrival))
					if len(row.Problems) > 0 {
						t.Fatalf("broken invariants: %q", row.Problems)
					}
					if row.Sold > row.Units || int64(row.Sold) != row.StoreSold || row.Sold+row.Refused != row.Buyers {
						t.Fatalf("sold %d, buckets lost %d, refused %d, of %d units and %d buyers", row.Sold, row.StoreSold, row.Refused, row.Units, row.Buyers)
					}
					// Redis's rebalance moves units in two scripts, and a buyer who reads every
					// bucket while units are between them may see none: it may undersell.
					exact := policy != policyPinned && !(policy == policyRebalance && be.Name() == "redis")
					if exact && (row.Sold != row.Units || row.Undersell != 0) {
						t.Errorf("%s sold %d of %d units, %d left: it must sell them all to a crowd larger than the stock", policy, row.Sold, row.Units, row.Undersell)
					}
				})
			}
		}
	}
}

// TestPinnedUndersellsUnderSkew shows the price of pinning buyers to one bucket: with a skewed
// crowd, the cold buckets keep units while buyers of the hot ones are told "sold out". Probing
// on empty sells the same crowd every unit.
func TestPinnedUndersellsUnderSkew(t *testing.T) {
	for _, be := range stores(t) {
		t.Run(be.Name(), func(t *testing.T) {
			t.Parallel()
			pinned := runTailT(t, be, tail(policyPinned, arrivalSkewed))
			if pinned.Undersell == 0 || pinned.FalseSoldOuts == 0 || int64(pinned.Sold)+pinned.Undersell != int64(pinned.Units) {
				t.Errorf("pinned, skewed: sold %d, left %d, false sold-outs %d (demand %v): want units left and buyers refused while they were", pinned.Sold, pinned.Undersell, pinned.FalseSoldOuts, pinned.Demand)
			}
			probe := runTailT(t, be, tail(policyProbe, arrivalSkewed))
			if probe.Sold != probe.Units || probe.Undersell != 0 || probe.FalseSoldOuts != 0 {
				t.Errorf("probe, skewed: sold %d of %d, left %d, false sold-outs %d", probe.Sold, probe.Units, probe.Undersell, probe.FalseSoldOuts)
			}
		})
	}
}

// TestNegativeControl decrements without the condition: the sale oversells, and the check says so.
func TestNegativeControl(t *testing.T) {
	for _, be := range stores(t) {
		t.Run(be.Name(), func(t *testing.T) {
			t.Parallel()
			c := tail(policyProbe, arrivalUniform)
			c.Blind = true
			row := runTailT(t, be, c)
			if row.Sold != row.Buyers || !strings.Contains(strings.Join(row.Problems, "\n"), "oversold") {
				t.Errorf("the unconditional decrement sold %d to %d buyers of %d units; problems %q: the check must catch the oversell", row.Sold, row.Buyers, row.Units, row.Problems)
			}
		})
	}
}

// TestThroughput measures each store briefly at K=1 and K=4.
func TestThroughput(t *testing.T) {
	for _, be := range stores(t) {
		for _, k := range []int{1, 4} {
			row, err := measureThroughput(t.Context(), be, k, 4, 50*time.Millisecond, 250*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			if row.UnitsPerS <= 0 || row.Units <= 0 {
				t.Errorf("%s K=%d: %+v", be.Name(), k, row)
			}
			t.Logf("%s K=%d: %.0f units/s (4 goroutines, -race)", be.Name(), k, row.UnitsPerS)
		}
	}
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sold  int
		left  []int64
		wants []string
	}{
		{"sold out", 10, []int64{0, 0}, nil},
		{"undersold", 7, []int64{3, 0}, nil},
		{"oversold", 12, []int64{-1, -1}, []string{"bucket 0 holds -1", "bucket 1 holds -1", "oversold: 12 buyers"}},
		{"count disagrees", 9, []int64{0, 0}, []string{"9 buyers told they got a unit, but the buckets lost 10"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := check(10, tc.sold, tc.left)
			if len(got) != len(tc.wants) {
				t.Fatalf("check = %q, want %d problems", got, len(tc.wants))
			}
			for i, w := range tc.wants {
				if !strings.HasPrefix(got[i], w) {
					t.Errorf("problem %d = %q, want it to start with %q", i, got[i], w)
				}
			}
		})
	}
}

func TestHomesAndSplit(t *testing.T) {
	if diff := cmp.Diff([]int64{4, 3, 3}, split(10, 3)); diff != "" {
		t.Errorf("split(10, 3) (-want +got):\n%s", diff)
	}
	c := tailConfig{Arrival: arrivalUniform, K: 8, Buyers: 80_000, Skew: 1, Seed: 1}
	demand := make([]int, c.K)
	for _, b := range homes(c) {
		demand[b]++
	}
	for b, n := range demand {
		if n < 9_000 || n > 11_000 {
			t.Errorf("uniform: bucket %d has %d of 80,000 buyers (%v)", b, n, demand)
		}
	}
	c.Arrival = arrivalSkewed
	skewed := homes(c)
	if diff := cmp.Diff(skewed, homes(c)); diff != "" {
		t.Errorf("the skewed crowd differs with the same seed (-want +got):\n%s", diff)
	}
	clear(demand)
	for _, b := range skewed {
		demand[b]++
	}
	for b := 1; b < c.K; b++ { // weights 1/(b+1): bucket 0 gets about (b+1)× bucket b's share
		if want := float64(demand[0]) / float64(b+1); float64(demand[b]) < 0.9*want || float64(demand[b]) > 1.1*want {
			t.Errorf("skewed: bucket %d has %d buyers, want about %.0f (%v)", b, demand[b], want, demand)
		}
	}
}

func TestParseOptions(t *testing.T) {
	o, err := parseOptions(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{1, 2, 4, 8, 16}, o.ks); diff != "" {
		t.Errorf("default -k (-want +got):\n%s", diff)
	}
	if o.database != "seckill_buckets" || o.prefix != "seckill:buckets:" || o.units != 10_000 || o.tailK != 8 || o.goroutines != 16 {
		t.Errorf("defaults: %+v", o)
	}
	for _, args := range [][]string{
		{"-k", "0"}, {"-k", ""}, {"-policies", "pinned,lucky"}, {"-backends", "etcd"}, {"-phases", ""},
		{"-buyers", "100", "-units", "100"}, {"-skew", "0"}, {"-duration", "0s"}, {"stray"},
	} {
		if _, err := parseOptions(args, io.Discard); err == nil {
			t.Errorf("parseOptions(%q) accepted it", args)
		}
	}
}
