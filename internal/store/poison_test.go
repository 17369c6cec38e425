package store_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/google/go-cmp/cmp"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/order"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/store"
)

// TestPoisonous: the errors MySQL gives for the values of a statement are sale.ErrPoison, to be
// isolated and parked; outages and lock conflicts are not, and are retried.
func TestPoisonous(t *testing.T) {
	for _, c := range []struct {
		err    error
		poison bool
	}{
		{&mysql.MySQLError{Number: 1270, Message: "Illegal mix of collations"}, true},
		{fmt.Errorf("confirm orders: %w", &mysql.MySQLError{Number: 1406}), true},
		{&mysql.MySQLError{Number: 1690}, true},
		{&mysql.MySQLError{Number: 1452}, true},
		{&mysql.MySQLError{Number: 1213}, false}, // deadlock
		{&mysql.MySQLError{Number: 1205}, false}, // lock wait
		{&mysql.MySQLError{Number: 1040}, false}, // too many connections
		{&mysql.MySQLError{Number: 1290}, false}, // read only (a failover)
		{&net.OpError{Op: "dial", Err: errors.New("refused")}, false},
		{mysql.ErrInvalidConn, false},
		{context.DeadlineExceeded, false},
		{nil, false},
	} {
		if got := errors.Is(store.Classify("op", c.err), sale.ErrPoison); got != c.poison {
			t.Errorf("%v: poison %v, want %v", c.err, got, c.poison)
		}
	}
}

// TestOutboxParking: a parked reservation leaves the claims and the backlog, once; an operator
// who clears parked_at puts it back. A row whose product id is beyond an event's range is claimed
// as Invalid rather than failing the claim of everyone behind it.
func TestOutboxParking(t *testing.T) {
	st, _ := itest.Store(t)
	ctx := context.Background()
	p := product(t, st, 10, sale.StrategyMySQL)
	ids, _ := insertOutbox(t, st.DB(), p.ID, 5, func(i int) string { return fmt.Sprintf("o-%d-%d", p.ID, i) })
	// Nothing the purchase path writes, but nothing in the schema refuses it either.
	res, err := st.DB().Exec(`INSERT INTO reservations (order_id, product_id, user_id, quantity, strategy, created_at)
		VALUES ('o-beyond', 18446744073709551615, 'u-beyond', 1, 'mysql', NOW(6))`)
	if err != nil {
		t.Fatal(err)
	}
	beyond, _ := res.LastInsertId()

	claimed, err := st.ClaimOutbox(ctx, "a", time.Minute, 100)
	if err != nil {
		t.Fatalf("claim with a row beyond the range: %v", err)
	}
	var invalid []int64
	for _, e := range claimed {
		if e.Invalid != "" {
			invalid = append(invalid, e.ID)
		}
	}
	if len(claimed) != 6 || !slices.Equal(invalid, []int64{beyond}) {
		t.Fatalf("claimed %d, invalid %v; want 6, [%d]", len(claimed), invalid, beyond)
	}

	park := []order.ParkedEntry{{ID: beyond, Reason: claimed[5].Invalid}, {ID: ids[2], Reason: "refused by the broker: ünïcode, and long " + string(make([]byte, 2000))}}
	parked, err := st.ParkOutbox(ctx, park)
	if err != nil || !slices.Equal(parked, []int64{beyond, ids[2]}) {
		t.Fatalf("ParkOutbox = %v, %v; want both", parked, err)
	}
	if again, err := st.ParkOutbox(ctx, park); err != nil || len(again) != 0 {
		t.Fatalf("ParkOutbox again = %v, %v; want nothing parked twice", again, err)
	}
	if err := st.ReleaseClaims(ctx, "a", ids); err != nil {
		t.Fatal(err)
	}
	claimed, err = st.ClaimOutbox(ctx, "b", time.Minute, 100)
	if err != nil || len(claimed) != 4 {
		t.Fatalf("claimed %d, %v; want the 4 not parked", len(claimed), err)
	}
	if n, err := st.OutboxBacklog(ctx); err != nil || n != 4 {
		t.Fatalf("backlog %d, %v; want 4", n, err)
	}

	// The operator's replay: fix the row, clear parked_at.
	if _, err := st.DB().Exec("UPDATE reservations SET parked_at = NULL, park_error = NULL WHERE id = ?", ids[2]); err != nil {
		t.Fatal(err)
	}
	claimed, err = st.ClaimOutbox(ctx, "c", time.Minute, 100)
	if err != nil || len(claimed) != 1 || claimed[0].ID != ids[2] {
		t.Fatalf("after the replay claimed %+v, %v; want %d", claimed, err, ids[2])
	}
}

// TestParkMessages: a parked message is recorded once however often it is parked, with what
// does not fit a column (an order id outside ASCII, bytes that are not UTF-8) made to fit.
func TestParkMessages(t *testing.T) {
	st, _ := itest.Store(t)
	ctx := context.Background()
	ms := []sale.Parked{
		{Loop: "consumer", Source: "seckill.orders", Position: "3:41", OrderID: "ordé-1", ProductID: 7,
			Payload: []byte(`{"v":1,"order_id":"ordé-1"}`), Reason: "Error 1270: Illegal mix of collations \xff"},
		{Loop: "consumer", Source: "seckill.orders", Position: "3:42", Payload: []byte("\x00\xffnot json"), Reason: "order event: invalid character"},
		{Loop: "persister", Source: "seckill:lua:{7}:stream", Position: "1700000000000-0#2", OrderID: "o-2", ProductID: 7,
			Payload: []byte(`{"rs":"o-2 uuu 1 1 1 "}`), Reason: "Error 1406: Data too long"},
	}
	fresh, err := st.ParkMessages(ctx, ms)
	if err != nil || len(fresh) != 3 {
		t.Fatalf("ParkMessages = %d, %v; want 3", len(fresh), err)
	}
	if fresh, err := st.ParkMessages(ctx, ms[1:]); err != nil || len(fresh) != 0 {
		t.Fatalf("ParkMessages again = %v, %v; want nothing new", fresh, err)
	}
	type row struct {
		Loop, Position, OrderID string
		Payload                 []byte
	}
	var got []row
	rows, err := st.DB().Query("SELECT loop_name, position, COALESCE(order_id, ''), payload FROM parked_messages ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.Loop, &r.Position, &r.OrderID, &r.Payload); err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	want := []row{
		{"consumer", "3:41", "", ms[0].Payload},
		{"consumer", "3:42", "", ms[1].Payload},
		{"persister", "1700000000000-0#2", "o-2", ms[2].Payload},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("parked_messages (-want +got):\n%s", diff)
	}
}

// TestConfirmOrdersPoison: an order id MySQL cannot compare with the column fails the batch as
// sale.ErrPoison (INSERT IGNORE does not cover it), nothing written; without it the batch goes.
func TestConfirmOrdersPoison(t *testing.T) {
	st, _ := itest.Store(t)
	ctx := context.Background()
	p := product(t, st, 10, sale.StrategyMySQL)
	_, orderIDs := insertOutbox(t, st.DB(), p.ID, 3, func(i int) string { return fmt.Sprintf("o-%d-%d", p.ID, i) })
	_, err := st.ConfirmOrders(ctx, append(slices.Clone(orderIDs), "ordé"))
	if n := mysqlErrno(err); !errors.Is(err, sale.ErrPoison) || n < 1267 || n > 1271 {
		t.Fatalf("ConfirmOrders with a non-ASCII id: %v; want ErrPoison (an illegal mix of collations)", err)
	}
	if n, err := st.ConfirmOrders(ctx, orderIDs); err != nil || n != 3 {
		t.Fatalf("ConfirmOrders = %d, %v; want 3", n, err)
	}
}
