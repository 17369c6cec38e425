package redislua

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
)

// A traceparent of version 00, as internal/tracing writes them.
const (
	tpA = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	tpC = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
)

// TestBatchCarriesTraceParents: a batch that carries traceparents writes them in a tp field of
// its stream entry, one line per accepted reservation, in the rs field's order ("" for a
// purchase that was not sampled); the refused purchases' are dropped with them. (A batch with
// none writes rs alone: TestBatchDecisions.)
func TestBatchCarriesTraceParents(t *testing.T) {
	ctx := t.Context()
	s, rdb := newSale(t)
	if err := s.Load(ctx, rdb, 1, State{Epoch: 3, Gen: 5, Initial: 2, Stock: 2, Limit: 1}); err != nil {
		t.Fatal(err)
	}
	got, err := s.PurchaseBatch(ctx, 1, 3, []Attempt{
		{UserID: "a", Quantity: 1, Key: "ka", OrderID: "o1", TraceParent: tpA},
		{UserID: "b", Quantity: 1, OrderID: "o2"},
		{UserID: "c", Quantity: 1, OrderID: "o3", TraceParent: tpC},
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Outcome{{Result: Accepted, OrderID: "o1", Left: 1}, {Result: Accepted, OrderID: "o2", Left: 0}, {Result: SoldOut}}, got); diff != "" {
		t.Fatalf("outcomes (-want +got):\n%s", diff)
	}
	entries, err := rdb.XRange(ctx, s.Keys(1).Stream, "-", "+").Result()
	if err != nil || len(entries) != 1 {
		t.Fatalf("%d stream entries, %v; want one for the batch", len(entries), err)
	}
	if diff := cmp.Diff(map[string]any{"rs": "o1 a 1 3 5 ka\no2 b 1 3 5 ", "tp": tpA + "\n"}, entries[0].Values); diff != "" {
		t.Fatalf("the batch's entry (-want +got):\n%s", diff)
	}
	rs, _, err := reservations(1, Strategy, entries[0])
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{tpA, ""}, []string{rs[0].TraceParent, rs[1].TraceParent}); diff != "" {
		t.Errorf("the persister reads the traceparents (-want +got):\n%s", diff)
	}
	if _, err := s.PurchaseBatch(ctx, 1, 3, []Attempt{{UserID: "d", Quantity: 1, OrderID: "o4", TraceParent: "00-a b"}}); err == nil {
		t.Error("a traceparent with a space was sent to the script")
	}
}

// TestTraceParentsOfAnEntry: how a persister reads an entry's tp field: one traceparent per
// reservation, in order; a count that differs from the reservations' makes the entry malformed
// (parked, loudly, rather than give a purchase another's trace); a value longer than any
// traceparent is dropped and its reservation kept.
func TestTraceParentsOfAnEntry(t *testing.T) {
	entry := func(rs, tp string) redis.XMessage {
		return redis.XMessage{ID: "1700000000000-0", Values: map[string]any{"rs": rs, "tp": tp}}
	}
	two := "o1 a 1 3 5 ka\no2 b 2 3 5 "
	for _, c := range []struct {
		name string
		m    redis.XMessage
		want []string // the reservations' traceparents; nil: malformed
	}{
		{"both traced", entry(two, tpA+"\n"+tpC), []string{tpA, tpC}},
		{"the second only", entry(two, "\n"+tpC), []string{"", tpC}},
		{"one line short", entry(two, tpA), nil},
		{"one line more", entry(two, tpA+"\n\n"+tpC), nil},
		{"too long: dropped", entry(two, tpA+"\n"+strings.Repeat("f", 56)), []string{tpA, ""}},
		{"tp with another field", redis.XMessage{ID: "1700000000000-0", Values: map[string]any{"rs": two, "tp": "\n", "x": "1"}}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			rs, _, err := reservations(1, Strategy, c.m)
			if c.want == nil {
				if err == nil {
					t.Fatalf("read as %+v, want malformed", rs)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range rs {
				got = append(got, r.TraceParent)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("traceparents (-want +got):\n%s", diff)
			}
		})
	}
}
