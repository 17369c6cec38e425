package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/order"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/store"
)

// TestMarkAndConfirmTakeLocksInOneOrder: the relay marks rows published while the consumer, which
// got their events a moment earlier, creates their orders; the order's foreign-key check locks the
// same rows. Order ids that sort against the ids used to make the two deadlock (1213); taken in
// one order they only wait for each other.
func TestMarkAndConfirmTakeLocksInOneOrder(t *testing.T) {
	st, _ := itest.Store(t)
	p := product(t, st, 4000, sale.StrategyMySQL)
	// Enough rows that the consumer's IN list is a small part of the table, as in a sale, so
	// that it is walked through the order id index rather than by a scan of the table.
	const n = 4000
	ids, orderIDs := insertOutbox(t, st.DB(), p.ID, n, func(i int) string {
		return fmt.Sprintf("o-%d-%06d", p.ID, n-i) // the later the row, the smaller its order id
	})
	ctx := context.Background()
	var deadlocks int
	const rounds, batch = 40, 200
	for round := range rounds {
		lo := round * ((n - batch) / rounds)
		mark, confirm := slices.Clone(ids[lo:lo+batch]), slices.Clone(orderIDs[lo:lo+batch])
		// Any order: the statements must not depend on the caller's.
		r := rand.New(rand.NewPCG(uint64(round), 7))
		r.Shuffle(len(mark), func(i, j int) { mark[i], mark[j] = mark[j], mark[i] })
		r.Shuffle(len(confirm), func(i, j int) { confirm[i], confirm[j] = confirm[j], confirm[i] })

		var wg sync.WaitGroup
		var markErr, confirmErr error
		start := make(chan struct{})
		// The confirm makes more round trips before its INSERT: start the mark later and later
		// so that some rounds overlap the two however fast this machine is.
		delay := time.Duration(round%20) * 100 * time.Microsecond
		wg.Go(func() { <-start; time.Sleep(delay); markErr = st.MarkPublishedOnce(ctx, mark) })
		wg.Go(func() { <-start; _, confirmErr = st.ConfirmOrdersOnce(ctx, confirm) })
		close(start)
		wg.Wait()
		for _, err := range []error{markErr, confirmErr} {
			switch {
			case mysqlErrno(err) == 1213:
				deadlocks++
			case err != nil:
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
	t.Logf("%d deadlocks", deadlocks)
	if deadlocks > 0 {
		t.Fatalf("%d deadlocks between MarkPublished and ConfirmOrders in %d rounds, want none", deadlocks, rounds)
	}
}

// TestMarkPublishedRetriesADeadlock provokes a deadlock that MarkPublished loses and checks that
// it runs the statement again instead of leaving the rows to be published again after the lease.
func TestMarkPublishedRetriesADeadlock(t *testing.T) {
	_, dsn := itest.Store(t)
	logs := &recordingHandler{}
	ctx := context.Background()
	st, err := store.Open(ctx, slog.New(logs), dsn, store.Options{MaxOpenConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p := product(t, st, 100, sale.StrategyMySQL)
	ids, _ := insertOutbox(t, st.DB(), p.ID, 52, func(i int) string { return fmt.Sprintf("d-%d-%d", p.ID, i) })
	a, b, filler := ids[0], ids[1], ids[2:]

	// The other transaction holds b, has written 50 rows (InnoDB rolls back the transaction that
	// wrote less, so the mark is the victim) and will ask for a once the mark holds it and waits
	// for b.
	other, err := st.DB().BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback() //nolint:errcheck // committed below
	if _, err := other.Exec("UPDATE reservations SET claim_owner = 'other' WHERE id IN (" + joinIDs(filler) + ")"); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Exec("SELECT id FROM reservations WHERE id = ? FOR UPDATE", b); err != nil {
		t.Fatal(err)
	}
	marked := make(chan error, 1)
	go func() { marked <- st.MarkPublished(ctx, []int64{b, a}) }()
	// The mark locks a at once (ids in ascending order) and cannot finish without b: once it has
	// run for a while it is waiting for b.
	itest.Eventually(t, 10*time.Second, func() (bool, string) {
		var waiting int
		err := st.DB().QueryRow(`SELECT COUNT(*) FROM information_schema.PROCESSLIST
			WHERE DB = DATABASE() AND INFO LIKE 'UPDATE reservations%published_at = NOW(6)%' AND TIME_MS > 50`).Scan(&waiting)
		return err == nil && waiting > 0, fmt.Sprintf("mark waiting for b: %d, %v", waiting, err)
	})
	if _, err := other.Exec("SELECT id FROM reservations WHERE id = ? FOR UPDATE", a); err != nil {
		t.Fatalf("the other transaction lost the deadlock: %v", err)
	}
	time.Sleep(20 * time.Millisecond) // the mark's retry now waits for a
	if err := other.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-marked; err != nil {
		t.Fatalf("MarkPublished after a deadlock: %v", err)
	}
	var unpublished int
	if err := st.DB().QueryRow("SELECT COUNT(*) FROM reservations WHERE id IN (?, ?) AND published_at IS NULL", a, b).Scan(&unpublished); err != nil || unpublished != 0 {
		t.Fatalf("unpublished after the mark = %d, %v; want 0", unpublished, err)
	}
	if !logs.contains("lock conflict; retrying", "1213") {
		t.Fatalf("no deadlock retry was logged: %q", logs.lines())
	}
}

// TestClaimOutboxOldestFirst: a claim takes the oldest unpublished, unclaimed rows and returns
// them whole.
func TestClaimOutboxOldestFirst(t *testing.T) {
	st, _ := itest.Store(t)
	p := product(t, st, 100, sale.StrategyMySQL)
	ids, orderIDs := insertOutbox(t, st.DB(), p.ID, 10, func(i int) string { return fmt.Sprintf("c-%d-%d", p.ID, i) })
	ctx := context.Background()
	if err := st.MarkPublished(ctx, ids[:2]); err != nil {
		t.Fatal(err)
	}
	got, err := st.ClaimOutbox(ctx, "r", time.Minute, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("claimed %d entries, want 3", len(got))
	}
	for i, e := range got {
		want := order.OutboxEntry{ID: ids[2+i], OrderID: orderIDs[2+i], ProductID: p.ID, UserID: fmt.Sprintf("u-%d", 2+i),
			Quantity: 1, Strategy: "mysql", CreatedAt: e.CreatedAt}
		if e != want || e.CreatedAt.IsZero() {
			t.Errorf("entry %d = %+v, want %+v", i, e, want)
		}
	}
	var owner string
	if err := st.DB().QueryRow("SELECT claim_owner FROM reservations WHERE id = ? AND claim_until > NOW(6)", ids[2]).Scan(&owner); err != nil || owner != "r" {
		t.Fatalf("claim owner = %q, %v; want r", owner, err)
	}

	// From an id on, the claim skips what is older, claimed or not.
	got, err = st.ClaimOutboxFrom(ctx, "s", time.Minute, 10, ids[7])
	if err != nil || len(got) != 3 || got[0].ID != ids[7] {
		t.Fatalf("claim from %d = %+v, %v; want the last 3 entries", ids[7], got, err)
	}
	got, err = st.ClaimOutbox(ctx, "t", time.Minute, 10)
	if err != nil || len(got) != 2 || got[0].ID != ids[5] || got[1].ID != ids[6] {
		t.Fatalf("claim of what is left = %+v, %v; want entries %d and %d", got, err, ids[5], ids[6])
	}
}

// insertOutbox inserts n reservations of one unit of product with the given order ids, in one
// statement, and returns their ids and order ids in id order.
func insertOutbox(t *testing.T, db *sql.DB, product int64, n int, orderID func(i int) string) ([]int64, []string) {
	t.Helper()
	var q strings.Builder
	q.WriteString("INSERT INTO reservations (order_id, product_id, user_id, quantity, strategy, created_at) VALUES ")
	var args []any
	orderIDs := make([]string, n)
	for i := range n {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString("(?, ?, ?, 1, 'mysql', NOW(6))")
		orderIDs[i] = orderID(i)
		args = append(args, orderIDs[i], product, fmt.Sprintf("u-%d", i))
	}
	if _, err := db.Exec(q.String(), args...); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query("SELECT id FROM reservations WHERE product_id = ? ORDER BY id", product)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if len(ids) != n {
		t.Fatalf("inserted %d reservations, want %d", len(ids), n)
	}
	return ids, orderIDs
}

func joinIDs(ids []int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ",")
}

func mysqlErrno(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

// recordingHandler keeps every log record, at every level.
type recordingHandler struct {
	mu   sync.Mutex
	recs []string
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	h.mu.Lock()
	h.recs = append(h.recs, b.String())
	h.mu.Unlock()
	return nil
}

func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler      { return h }

func (h *recordingHandler) lines() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.recs)
}

func (h *recordingHandler) contains(parts ...string) bool {
	for _, l := range h.lines() {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(l, p)
		}
		if ok {
			return true
		}
	}
	return false
}
