package mysqllock_test

import (
	"database/sql"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/goleak"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/lock/locktest"
	"github.com/seckill-go/seckill-go/internal/lock/mysqllock"
)

// TestMain runs the holder of the fault tests when re-executed as one (holderEnv set), and
// otherwise fails the run if a goroutine outlives the tests: a lease's watchdog.
func TestMain(m *testing.M) {
	if os.Getenv(holderEnv) != "" {
		os.Exit(runHolder())
	}
	goleak.VerifyTestMain(m,
		// database/sql's connection opener lives as long as its pool, which Cleanup closes; a
		// pool abandoned by the helper's Close-less crash paths is not ours to wait for.
		goleak.IgnoreTopFunction("database/sql.(*DB).connectionOpener"),
	)
}

// newDB returns a pool on a fresh test database (itest.DatabaseDSN) that interpolates parameters
// as the app's store does (one round trip per statement); changed rows, not matched ones, are
// reported (the driver's default). addr, if not empty, replaces the server's address (a proxy's).
// The holder process of the fault tests uses the driver's defaults (server-side prepared
// statements) instead.
func newDB(tb testing.TB, addr string) (*sql.DB, string) {
	tb.Helper()
	dsn := itest.DatabaseDSN(tb)
	return openDB(tb, dsn, addr), dsn
}

func openDB(tb testing.TB, dsn, addr string) *sql.DB {
	tb.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		tb.Fatal(err)
	}
	if addr != "" {
		cfg.Addr = addr
	}
	cfg.Timeout = 2 * time.Second
	cfg.InterpolateParams = true
	cfg.Logger = quiet{} // the driver reports every connection a cut proxy breaks
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(32)
	db.SetMaxIdleConns(32)
	tb.Cleanup(func() { db.Close() })
	return db
}

// newClient returns a lock client on db whose table exists.
func newClient(tb testing.TB, db *sql.DB, opts mysqllock.Options) *mysqllock.Client {
	tb.Helper()
	if opts.Logger == nil {
		opts.Logger = itest.Logger()
	}
	c, err := mysqllock.New(db, opts)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	if err := c.EnsureTable(tb.Context()); err != nil {
		tb.Fatal(err)
	}
	return c
}

// quiet is the driver's logger: silent unless SECKILL_TEST_LOG is set.
type quiet struct{}

func (quiet) Print(v ...any) {
	if os.Getenv("SECKILL_TEST_LOG") != "" {
		fmt.Fprintln(os.Stderr, v...)
	}
}

// attempts counts a client's tries (Options.OnAttempt).
type attempts struct{ won, lost atomic.Int64 }

func (a *attempts) observe(won bool) {
	if won {
		a.won.Add(1)
	} else {
		a.lost.Add(1)
	}
}

func (a *attempts) String() string {
	return fmt.Sprintf("%d won, %d lost", a.won.Load(), a.lost.Load())
}

func mustAcquire(tb testing.TB, c *mysqllock.Client, name string) *mysqllock.Lease {
	tb.Helper()
	return locktest.MustAcquire(tb, c.Acquire, name)
}

func mustRelease(tb testing.TB, l *mysqllock.Lease) {
	tb.Helper()
	if err := l.Release(tb.Context()); err != nil {
		tb.Fatalf("Release = %v", err)
	}
}

// row is what the lock table holds for one name.
type row struct {
	ID      uint64
	Owner   sql.NullString
	Expires bool // expires_at is set
	Live    bool // expires_at is set and in the future
}

// lockRow returns the row of name in c's table, and false if there is none.
func lockRow(tb testing.TB, db *sql.DB, c *mysqllock.Client, name string) (row, bool) {
	tb.Helper()
	var r row
	err := db.QueryRowContext(tb.Context(), "SELECT id, owner, expires_at IS NOT NULL, COALESCE(expires_at >= UTC_TIMESTAMP(6), FALSE) FROM `"+c.Table()+"` WHERE name = ?", name).
		Scan(&r.ID, &r.Owner, &r.Expires, &r.Live)
	if err == sql.ErrNoRows {
		return row{}, false
	}
	if err != nil {
		tb.Fatal(err)
	}
	return r, true
}

// openHolderDB opens the holder process's pool.
func openHolderDB(dsn string) (*sql.DB, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	cfg.Timeout = 2 * time.Second
	return sql.Open("mysql", cfg.FormatDSN())
}
