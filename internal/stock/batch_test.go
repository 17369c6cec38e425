package stock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/stock"
	"github.com/seckill-go/seckill-go/internal/store"
)

// batchCases are the strategies that deduct batches (all but `none`).
func batchCases() []deductorCase {
	var out []deductorCase
	for _, dc := range deductorCases() {
		if dc.safe {
			out = append(out, dc)
		}
	}
	return out
}

func asBatch(tb testing.TB, d sale.Deductor) sale.BatchDeductor {
	tb.Helper()
	b, ok := d.(sale.BatchDeductor)
	if !ok {
		tb.Fatalf("%T does not deduct batches", d)
	}
	return b
}

// TestBatchContract: what DeductBatch must do with several purchases in one transaction, for
// every strategy that combines.
func TestBatchContract(t *testing.T) {
	itest.Integration(t)
	st, _ := itest.Store(t)
	for _, dc := range batchCases() {
		t.Run(string(dc.strategy), func(t *testing.T) {
			t.Parallel()
			d := asBatch(t, dc.build(t, st))
			t.Run("the whole batch fits", func(t *testing.T) {
				t.Parallel()
				p := newProduct(t, st, dc.strategy, 10)
				errs := mustBatch(t, d, batchOf(p, 1, 1, 1, 1, 1))
				assertOutcomes(t, errs, nil, nil, nil, nil, nil)
				assertStock(t, st, p.ID, 5)
				assertReserved(t, st, p.ID, 5, 5)
			})
			t.Run("fewer units than the batch wants: the earliest that fit get them", func(t *testing.T) {
				t.Parallel()
				p := newProduct(t, st, dc.strategy, 3)
				// 2 fits (1 left), the next 2 does not, 1 fits (0 left), the last 1 does not.
				errs := mustBatch(t, d, batchOf(p, 2, 2, 1, 1))
				assertOutcomes(t, errs, nil, sale.ErrSoldOut, nil, sale.ErrSoldOut)
				assertStock(t, st, p.ID, 0)
				assertReserved(t, st, p.ID, 2, 3)
			})
			t.Run("nothing left", func(t *testing.T) {
				t.Parallel()
				p := newProduct(t, st, dc.strategy, 0)
				errs := mustBatch(t, d, batchOf(p, 1, 1, 1))
				assertOutcomes(t, errs, sale.ErrSoldOut, sale.ErrSoldOut, sale.ErrSoldOut)
				assertStock(t, st, p.ID, 0)
				assertReserved(t, st, p.ID, 0, 0)
			})
			t.Run("purchases colliding with committed ones are refused, the others go through", func(t *testing.T) {
				t.Parallel()
				p := newProduct(t, st, dc.strategy, 10)
				batch := batchOf(p, 1, 1, 1, 1)
				batch[3].IdempotencyKey = "key-" + itest.Suffix(8)
				// Committed earlier (another replica, say): user 1 bought; user 3 used its key.
				mustDeduct(t, dc.build(t, st), reservation(p, batch[1].UserID, 1, ""))
				q := newProduct(t, st, dc.strategy, 10)
				mustDeduct(t, dc.build(t, st), reservation(q, batch[3].UserID, 1, batch[3].IdempotencyKey))
				errs := mustBatch(t, d, batch)
				if dc.keysPerProduct { // the key was used in another product's sale: not this one's
					assertOutcomes(t, errs, nil, sale.ErrAlreadyPurchased, nil, nil)
					assertStock(t, st, p.ID, 6)
					assertReserved(t, st, p.ID, 4, 4)
					return
				}
				assertOutcomes(t, errs, nil, sale.ErrAlreadyPurchased, nil, sale.ErrIdempotencyKeyInUse)
				if r, ok := sale.InUseReceipt(errs[3]); !ok || r.ProductID != q.ID {
					// The refusal carries the purchase that used the key: here another product's,
					// which the Service answers as a key reused for another purchase.
					t.Errorf("user 3's refusal carries %+v (%v), want a receipt of product %d", r, ok, q.ID)
				}
				assertStock(t, st, p.ID, 7)
				assertReserved(t, st, p.ID, 3, 3)
			})
			t.Run("two purchases of one user in a batch break the contract: nothing written", func(t *testing.T) {
				t.Parallel()
				p := newProduct(t, st, dc.strategy, 10)
				batch := batchOf(p, 1, 1)
				batch[1].UserID = batch[0].UserID
				if _, err := d.DeductBatch(t.Context(), batch); err == nil {
					t.Fatal("DeductBatch accepted two purchases of one user")
				}
				assertStock(t, st, p.ID, 10)
			})
			t.Run("sale reset underneath: the whole batch refused", func(t *testing.T) {
				t.Parallel()
				p := newProduct(t, st, dc.strategy, 10)
				batch := batchOf(p, 1, 1)
				if _, err := st.ResetProduct(t.Context(), p.ID, sale.Reset{Stock: 10}, time.Now().UTC()); err != nil {
					t.Fatal(err)
				}
				_, err := d.DeductBatch(t.Context(), batch)
				assertErr(t, err, sale.ErrSaleChanged)
				assertStock(t, st, p.ID, 10)
				assertReserved(t, st, p.ID, 0, 0)
			})
		})
	}
}

// TestCombinedPurchases runs purchases through a real Combiner over each strategy. The first
// batch is held until the others have queued, so that they deterministically form the second
// batch together: two purchases of one user and two copies of one keyed purchase among them.
func TestCombinedPurchases(t *testing.T) {
	itest.Integration(t)
	st, _ := itest.Store(t)
	for _, dc := range batchCases() {
		t.Run(string(dc.strategy), func(t *testing.T) {
			t.Parallel()
			gate := &gatedBatches{d: asBatch(t, dc.build(t, st)), hold: make(chan struct{}), entered: make(chan struct{})}
			c, err := sale.NewCombiner(gate, sale.CombinerOptions{Max: 64, Timeout: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close)
			p := newProduct(t, st, dc.strategy, 4)
			key := "twice-" + itest.Suffix(8)
			type want struct {
				r   sale.Reservation
				err error
			}
			u := func(name string) string { return name + "-" + string(dc.strategy) } // keys are scoped per user
			first := reservation(p, u("opener"), 1, "")
			// Behind the first batch, in arrival order; 3 units are left for them.
			queued := []want{
				{reservation(p, u("alice"), 1, "k-a1"), nil},
				{reservation(p, u("alice"), 1, "k-a2"), sale.ErrAlreadyPurchased}, // a second purchase of alice
				{reservation(p, u("bob"), 1, key), nil},
				{reservation(p, u("bob"), 1, key), sale.ErrIdempotencyKeyInUse}, // bob's retry: the Service replays it
				{reservation(p, u("carol"), 1, ""), nil},
				{reservation(p, u("dave"), 1, ""), sale.ErrSoldOut},
			}
			errs := make([]error, len(queued)+1)
			var wg sync.WaitGroup
			wg.Go(func() { errs[0] = c.Deduct(t.Context(), first) })
			<-gate.entered // the first batch runs and is held
			for i, q := range queued {
				wg.Go(func() { errs[i+1] = c.Deduct(t.Context(), q.r) })
				waitQueued(t, c, i+1)
			}
			close(gate.hold)
			wg.Wait()
			if errs[0] != nil {
				t.Fatalf("first purchase: %v", errs[0])
			}
			for i, q := range queued {
				if got := errs[i+1]; (q.err == nil) != (got == nil) || !errors.Is(got, q.err) {
					t.Errorf("%s (key %q): %v, want %v", q.r.UserID, q.r.IdempotencyKey, got, q.err)
				}
			}
			if r, ok := sale.InUseReceipt(errs[4]); !ok || r.OrderID != queued[2].r.OrderID {
				t.Errorf("bob's retry carries %+v (%v), want the receipt of his accepted purchase", r, ok)
			}
			if sizes := gate.sizes(); len(sizes) != 2 || sizes[0] != 1 || sizes[1] != 4 {
				// 1: the first; 4: alice, bob, carol, dave. alice's second purchase and bob's
				// copy are answered from that batch's outcome: no third batch.
				t.Errorf("batch sizes %v, want [1 4]", sizes)
			}
			assertStock(t, st, p.ID, 0)
			assertReserved(t, st, p.ID, 4, 4)
		})
	}
}

// TestCombinedBuyerCancelled: a buyer who goes away while its purchase waits in the queue deducts
// nothing; one who goes away while its batch commits gets the truth (accepted), and its receipt is
// there for a retry with its key.
func TestCombinedBuyerCancelled(t *testing.T) {
	itest.Integration(t)
	st, _ := itest.Store(t)
	m, err := stock.NewMySQL(st)
	if err != nil {
		t.Fatal(err)
	}
	p := newProduct(t, st, sale.StrategyMySQL, 10)
	committing := make(chan struct{})
	resume := make(chan struct{})
	var once sync.Once
	m.SetHooks(nil, func(context.Context, *store.PurchaseTx) error {
		once.Do(func() {
			close(committing)
			<-resume
		})
		return nil
	})
	c, err := sale.NewCombiner(m, sale.CombinerOptions{Max: 64, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)

	key := "gone-" + itest.Suffix(8)
	inBatch := reservation(p, "in-batch", 1, key)
	bctx, cancelInBatch := context.WithCancel(t.Context())
	inBatchErr := make(chan error, 1)
	go func() { inBatchErr <- c.Deduct(bctx, inBatch) }()
	<-committing // its batch is about to commit

	qctx, cancelQueued := context.WithCancel(t.Context())
	queuedErr := make(chan error, 1)
	go func() { queuedErr <- c.Deduct(qctx, reservation(p, "queued", 1, "")) }()
	cancelQueued()
	if err := <-queuedErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("buyer cancelled while queued: %v, want context.Canceled", err)
	}

	cancelInBatch()
	close(resume)
	if err := <-inBatchErr; err != nil {
		t.Fatalf("buyer cancelled while its batch committed: %v, want nil (the purchase committed)", err)
	}
	r, err := st.StoredReceipt(t.Context(), inBatch.UserID, key)
	if err != nil || r.OrderID != inBatch.OrderID {
		t.Fatalf("receipt for the retry: %+v, %v; want order %s", r, err, inBatch.OrderID)
	}
	assertStock(t, st, p.ID, 9)
	assertReserved(t, st, p.ID, 1, 1)
}

// TestBatchFailedCommit: the batch's connection dies just before COMMIT. The whole batch is
// refused and nothing of it stays; the same batch then goes through.
func TestBatchFailedCommit(t *testing.T) {
	itest.Integration(t)
	st, _ := itest.Store(t)
	m, err := stock.NewMySQL(st)
	if err != nil {
		t.Fatal(err)
	}
	p := newProduct(t, st, sale.StrategyMySQL, 10)
	killed := false
	m.SetHooks(nil, func(ctx context.Context, tx *store.PurchaseTx) error {
		if killed {
			return nil
		}
		killed = true
		id, err := tx.ConnectionID(ctx)
		if err != nil {
			return err
		}
		_, err = st.DB().ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id))
		return err
	})
	batch := batchOf(p, 1, 2, 1)
	if _, err := m.DeductBatch(t.Context(), batch); !errors.Is(err, sale.ErrUnavailable) {
		t.Fatalf("batch whose commit failed: %v, want ErrUnavailable", err)
	}
	assertStock(t, st, p.ID, 10)
	assertReserved(t, st, p.ID, 0, 0)

	errs := mustBatch(t, m, batch)
	assertOutcomes(t, errs, nil, nil, nil)
	assertStock(t, st, p.ID, 6)
	assertReserved(t, st, p.ID, 3, 4)
}

// TestBatchDeadlockRetried: a real deadlock with another transaction, which InnoDB resolves by
// rolling the batch back. The whole batch runs again and commits once; nothing is applied twice
// or half.
//
// The other transaction, B, is made the heavier one (InnoDB rolls back the lighter) with 300 rows
// of its own, then locks the product row and inserts a reservation of one of the batch's users,
// which waits for the batch's uncommitted row. The batch then updates the product row, which waits
// for B: a cycle.
func TestBatchDeadlockRetried(t *testing.T) {
	itest.Integration(t)
	st, _ := itest.Store(t)
	db := st.DB()
	if _, err := db.ExecContext(t.Context(), "CREATE TABLE ballast (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	m, err := stock.NewMySQL(st)
	if err != nil {
		t.Fatal(err)
	}
	p := newProduct(t, st, sale.StrategyMySQL, 10)
	batch := batchOf(p, 1, 1, 1)
	var attempts atomic.Int32
	bDone := make(chan error, 1)
	m.SetHooks(func(ctx context.Context, _ *store.PurchaseTx) error {
		if attempts.Add(1) > 1 {
			return nil
		}
		go func() { bDone <- heavyRival(db, p.ID, batch[0].UserID) }()
		// Wait until B waits for the batch's row, then let the batch walk into B's lock. (The
		// monitor output, because information_schema.INNODB_TRX is a cache that MariaDB does not
		// always refresh while a test polls it.)
		itest.Eventually(t, 10*time.Second, func() (bool, string) {
			select {
			case berr := <-bDone:
				t.Fatalf("the rival ended before waiting for the batch: %v", berr)
			default:
			}
			status := innodbStatus(ctx, db)
			return rivalWaits(status), "the rival does not wait for the batch yet:\n" + status
		})
		return nil
	}, nil)
	errs := mustBatch(t, m, batch)
	if err := <-bDone; err != nil {
		t.Fatal(err)
	}
	assertOutcomes(t, errs, nil, nil, nil)
	if n := attempts.Load(); n < 2 {
		t.Fatalf("the batch ran %d time(s): no deadlock was provoked, the test proves nothing", n)
	}
	assertStock(t, st, p.ID, 7)
	assertReserved(t, st, p.ID, 3, 3)
}

// heavyRival is transaction B of TestBatchDeadlockRetried. It rolls back at the end, whatever
// happened: only the batch's outcome matters.
func heavyRival(db *sql.DB, productID int64, user string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO ballast (id)
		WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300) SELECT i FROM n`); err != nil {
		return fmt.Errorf("rival ballast: %w", err)
	}
	if _, err := tx.ExecContext(ctx, "UPDATE products SET name = name WHERE id = ?", productID); err != nil {
		return fmt.Errorf("rival lock: %w", err)
	}
	// Waits for the batch's uncommitted reservation of user; the batch is rolled back (deadlock
	// victim), so this then goes through, and B rolls it back.
	_, err = tx.ExecContext(ctx, `INSERT INTO reservations (order_id, product_id, user_id, quantity, strategy, created_at)
		VALUES (?, ?, ?, 1, 'mysql', NOW(6))`, "rival-"+itest.Suffix(8), productID, user)
	if err != nil && !isDeadlock(err) {
		return fmt.Errorf("rival insert: %w", err)
	}
	return nil
}

func isDeadlock(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1213
}

// gatedBatches holds the first batch until hold is closed, and records every batch's size.
type gatedBatches struct {
	d       sale.BatchDeductor
	hold    chan struct{}
	entered chan struct{}
	once    sync.Once
	mu      sync.Mutex
	size    []int
	calls   atomic.Int32
}

func (g *gatedBatches) DeductBatch(ctx context.Context, batch []sale.Reservation) ([]error, error) {
	g.mu.Lock()
	g.size = append(g.size, len(batch))
	g.mu.Unlock()
	if g.calls.Add(1) == 1 {
		g.once.Do(func() { close(g.entered) })
		<-g.hold
	}
	return g.d.DeductBatch(ctx, batch)
}

func (g *gatedBatches) sizes() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]int(nil), g.size...)
}

// waitQueued waits until n purchases wait in the combiner behind the held batch.
func waitQueued(tb testing.TB, c *sale.Combiner, n int) {
	tb.Helper()
	itest.Eventually(tb, 10*time.Second, func() (bool, string) {
		got := c.Queued()
		return got >= n, fmt.Sprintf("%d queued, want %d", got, n)
	})
}

func batchOf(p sale.Product, qty ...int) []sale.Reservation {
	out := make([]sale.Reservation, len(qty))
	for i, q := range qty {
		out[i] = reservation(p, fmt.Sprintf("batch-buyer-%d", i), q, "")
	}
	return out
}

func mustBatch(tb testing.TB, d sale.BatchDeductor, batch []sale.Reservation) []error {
	tb.Helper()
	errs, err := d.DeductBatch(tb.Context(), batch)
	if err != nil {
		tb.Fatalf("DeductBatch of %d: %v", len(batch), err)
	}
	if len(errs) != len(batch) {
		tb.Fatalf("DeductBatch answered %d of %d purchases", len(errs), len(batch))
	}
	return errs
}

func assertOutcomes(tb testing.TB, got []error, want ...error) {
	tb.Helper()
	for i := range want {
		if (want[i] == nil) != (got[i] == nil) || !errors.Is(got[i], want[i]) {
			tb.Errorf("purchase %d: %v, want %v", i, got[i], want[i])
		}
	}
}

func assertReserved(tb testing.TB, st *store.Store, id int64, reservations, units int) {
	tb.Helper()
	f := mustAudit(tb, st, id)
	if f.Reservations != reservations || f.ReservedUnits != units {
		tb.Errorf("reservations %d (%d units), want %d (%d units)", f.Reservations, f.ReservedUnits, reservations, units)
	}
	if v := f.Violations(false); len(v) > 0 {
		tb.Errorf("invariants broken: %q", v)
	}
}

// innodbStatus returns the TRANSACTIONS section of the InnoDB monitor.
func innodbStatus(ctx context.Context, db *sql.DB) string {
	var typ, name, status string
	if err := db.QueryRowContext(ctx, "SHOW ENGINE INNODB STATUS").Scan(&typ, &name, &status); err != nil {
		return err.Error()
	}
	if i := strings.Index(status, "TRANSACTIONS\n"); i >= 0 {
		status = status[i:]
	}
	if i := strings.Index(status, "FILE I/O"); i >= 0 {
		status = status[:i]
	}
	return status
}

// rivalWaits reports whether the monitor shows the rival's INSERT waiting for a lock.
func rivalWaits(status string) bool {
	for _, trx := range strings.Split(status, "---TRANSACTION") {
		if strings.Contains(trx, "'rival-") && strings.Contains(trx, "TRX HAS BEEN WAITING") {
			return true
		}
	}
	return false
}
