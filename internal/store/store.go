// Package store is the MySQL/MariaDB adapter of seckill-go: gorm rows, the queries behind the sale
// domain, the purchase transaction the stock strategies run in, the outbox the relay drains and
// the orders the consumer writes. It translates driver errors into the sale package's sentinels
// and never lets a gorm row leave the package.
package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"
	"github.com/sethvargo/go-retry"
	"go.opentelemetry.io/otel/trace"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
	gormtracing "gorm.io/plugin/opentelemetry/tracing"

	"github.com/seckill-go/seckill-go/internal/sale"
)

// Store is the database adapter. It is safe for concurrent use.
type Store struct {
	db   *gorm.DB
	sql  *sql.DB
	log  *slog.Logger
	name string
	// window is how long a new order waits for payment (Options.PaymentWindow).
	window time.Duration
	// issuers remembers the ids of lock issuers (fence.go): issuer string → uint64.
	issuers sync.Map
	// traceEvents is Options.TraceEvents: nil when tracing is off.
	traceEvents func(ctx context.Context, kind string, purchases []string) (context.Context, string, func(error))
}

// Options tunes the connection pool.
type Options struct {
	// Tracer, if set, traces the store's statements through gorm (their text, never their
	// values: those are buyers' and orders' ids); nil installs nothing.
	Tracer trace.TracerProvider
	// MaxOpenConns bounds the pool; size it to the concurrency one process should put on MySQL.
	MaxOpenConns int
	// PaymentWindow is how long an order waits for payment once the consumer has created it
	// (SECKILL_PAYMENT_WINDOW); 0 means 10 minutes.
	PaymentWindow time.Duration
	// TraceEvents, set only when tracing is on (internal/tracing's Lifecycle), starts the span
	// of orders' lifecycle change of kind, given their purchases' traceparents ("" for one
	// untraced), and returns the context to write the order events in, the traceparent they
	// carry to the event relay ("" for none) and the span's end. Nil, a lifecycle change reads
	// and writes no traceparent.
	TraceEvents func(ctx context.Context, kind string, purchases []string) (context.Context, string, func(error))
}

// PoolIdleTime is how long a pooled MySQL connection may stay idle before it is closed: the pool
// a burst opened stays that long. The soak's warm-up must be at least this long for its early
// window to see the pool at its steady size.
const PoolIdleTime = time.Minute

// Open connects to the database named in dsn (see NormalizeDSN) and waits until it answers or
// ctx ends.
func Open(ctx context.Context, log *slog.Logger, dsn string, o Options) (*Store, error) {
	cfg, err := NormalizeDSN(dsn)
	if err != nil {
		return nil, err
	}
	cfg.Logger = driverLogger{log}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	sqlDB := sql.OpenDB(readCommitted{connector})
	if o.MaxOpenConns <= 0 {
		o.MaxOpenConns = 32
	}
	sqlDB.SetMaxOpenConns(o.MaxOpenConns)
	// Every connection the pool opens may stay idle in it: with fewer idle places than open
	// connections, a burst that keeps between the two busy closes a connection whenever one is
	// put back and opens one when the next request comes — a MySQL handshake per purchase, a
	// tenth of a replica's CPU in a stampede, and 6,000 connections in 20 s for the server.
	// The connections a burst opened close once they have been idle for a while instead.
	sqlDB.SetMaxIdleConns(o.MaxOpenConns)
	sqlDB.SetConnMaxIdleTime(PoolIdleTime)

	if o.PaymentWindow <= 0 {
		o.PaymentWindow = defaultPaymentWindow
	}
	s := &Store{sql: sqlDB, log: log, name: cfg.DBName, window: o.PaymentWindow, traceEvents: o.TraceEvents}
	// Wait first: gorm.Open asks the server its version, and would fail at once while MySQL is
	// still starting (a replica started beside its database).
	if err := s.waitReady(ctx); err != nil {
		sqlDB.Close()
		return nil, err
	}
	s.db, err = gorm.Open(gormmysql.New(gormmysql.Config{Conn: sqlDB}), &gorm.Config{
		// Every write here is either a single statement or inside an explicit transaction.
		SkipDefaultTransaction: true,
		Logger:                 logger.Discard,
		NowFunc:                func() time.Time { return time.Now().UTC() },
	})
	if err != nil {
		sqlDB.Close()
		return nil, fmt.Errorf("store: %w", err)
	}
	if o.Tracer != nil {
		// No metrics: Prometheus has the pool's (CollectDB). Statements cut at traceStatementMax:
		// a batch's INSERT holds a row of placeholders per purchase, and the plugin runs four
		// regular expressions over the statement it keeps, per traced statement.
		plugin := gormtracing.NewPlugin(gormtracing.WithTracerProvider(o.Tracer), gormtracing.WithoutQueryVariables(), gormtracing.WithoutMetrics(),
			gormtracing.WithQueryFormatter(shortStatement))
		if err := s.db.Use(plugin); err != nil {
			sqlDB.Close()
			return nil, fmt.Errorf("store: tracing: %w", err)
		}
	}
	return s, nil
}

// traceStatementMax is the longest statement a span keeps, in bytes.
const traceStatementMax = 300

// shortStatement is q cut at traceStatementMax bytes (on a rune's start), with "…" when cut.
func shortStatement(q string) string {
	if len(q) <= traceStatementMax {
		return q
	}
	i := traceStatementMax
	for i > 0 && !utf8.RuneStart(q[i]) {
		i--
	}
	return q[:i] + "…"
}

// readCommitted is the pool's connector: every connection it opens is set to READ COMMITTED for
// its whole session, so that a transaction begins in one round trip (START TRANSACTION) instead of
// two (SET TRANSACTION ISOLATION LEVEL before each). Every transaction of the store runs at READ
// COMMITTED: no gap locks, and each statement sees the latest committed rows. (A DSN parameter
// would do it too, but its name differs: tx_isolation on MariaDB, transaction_isolation on MySQL 8;
// the SQL statement is the same on both.)
type readCommitted struct{ driver.Connector }

func (c readCommitted) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	execer, ok := conn.(driver.ExecerContext)
	if !ok {
		conn.Close()
		return nil, errors.New("store: the MySQL driver cannot execute statements on a connection")
	}
	if _, err := execer.ExecContext(ctx, "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED", nil); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// waitReady pings the database until it answers, waiting 100 ms after the first failure and
// twice as long after each next one, 2 s at the most, until ctx ends.
func (s *Store) waitReady(ctx context.Context) error {
	var last error
	b := retry.WithCappedDuration(2*time.Second, retry.NewExponential(100*time.Millisecond))
	err := retry.Do(ctx, b, func(ctx context.Context) error {
		if last = s.Ping(ctx); last != nil {
			s.log.Warn("waiting for MySQL", "err", last)
			return retry.RetryableError(last)
		}
		return nil
	})
	if err == nil {
		return nil
	}
	if last == nil { // ctx had ended before the first ping
		last = err
	}
	return fmt.Errorf("store: MySQL not reachable: %w", last)
}

// NormalizeDSN parses a go-sql-driver DSN and sets what the store relies on: parseTime, UTC
// times on both sides, client-side parameter interpolation (one round trip per statement) and
// found-rows semantics for RowsAffected.
func NormalizeDSN(dsn string) (*mysql.Config, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("store: bad MySQL DSN: %w", err)
	}
	if cfg.DBName == "" {
		return nil, errors.New("store: the MySQL DSN names no database (…/seckill)")
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	cfg.InterpolateParams = true
	// RowsAffected counts matched rows, not changed ones: a write of the value a row already holds
	// (a lost update under the `none` strategy, say) still reports that it found the row.
	cfg.ClientFoundRows = true
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	return cfg, nil
}

// Name returns the name of the database: products are numbered per database, so what is named
// after a product outside of it (a lock) carries it too.
func (s *Store) Name() string { return s.name }

// Close closes the connection pool.
func (s *Store) Close() error { return s.sql.Close() }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return s.sql.PingContext(ctx)
}

// DB returns the underlying pool, for migrations and audits that speak plain SQL.
func (s *Store) DB() *sql.DB { return s.sql }

// driverLogger routes the MySQL driver's own messages (broken connections) to slog.
type driverLogger struct{ log *slog.Logger }

func (l driverLogger) Print(v ...any) { l.log.Warn(fmt.Sprint(v...), "component", "mysql-driver") }

// MySQL error numbers the store reacts to.
const (
	errTooManyConns    = 1040
	errDupEntry        = 1062
	errLockWaitTimeout = 1205
	errDeadlock        = 1213
	errNoReferencedRow = 1452
)

func mysqlErrno(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

func isDuplicate(err error) bool { return mysqlErrno(err) == errDupEntry }

// retryable reports a transaction that lost a lock conflict and can run again unchanged.
func retryable(err error) bool {
	n := mysqlErrno(err)
	return n == errDeadlock || n == errLockWaitTimeout
}

// classify turns infrastructure failures into sale.ErrUnavailable so that the HTTP layer answers
// 503, not 500, and the values MySQL refused (rowErrnos) into sale.ErrPoison, for the loops to
// park; domain errors and programming errors pass through unchanged. Every transaction's error
// comes through here (retryConflicts), so nothing needs to mark it again.
func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	var ve *sale.ValidationError
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound), errors.Is(err, sql.ErrNoRows):
		return sale.ErrNotFound
	case errors.As(err, &ve),
		errors.Is(err, sale.ErrNotFound), errors.Is(err, sale.ErrSoldOut), errors.Is(err, sale.ErrLimitReached),
		errors.Is(err, sale.ErrIdempotencyKeyInUse), errors.Is(err, sale.ErrUnavailable),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	var netErr net.Error
	if retryable(err) || mysqlErrno(err) == errTooManyConns || errors.As(err, &netErr) || errors.Is(err, mysql.ErrInvalidConn) ||
		errors.Is(err, sql.ErrConnDone) || errors.Is(err, driver.ErrBadConn) {
		return fmt.Errorf("%s: %w: %w", op, sale.ErrUnavailable, err)
	}
	if rowErrnos[mysqlErrno(err)] { // the values were refused: no retry will do (sale.RowFault)
		return fmt.Errorf("%s: %w: %w", op, sale.ErrPoison, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// inTx runs fn in a transaction at the sessions' READ COMMITTED (no gap locks; every statement
// sees the latest committed rows; see readCommitted) and runs it again, up to three
// times, when it loses a deadlock or a lock wait (retryConflicts).
func (s *Store) inTx(ctx context.Context, op string, fn func(tx *gorm.DB) error) error {
	return retryConflicts(ctx, op, func() error {
		return s.db.WithContext(ctx).Transaction(fn)
	})
}

// retryConflicts runs attempt, and runs it again while it loses a deadlock (1213) or a lock wait
// (1205), after conflictBackoff: the statement or transaction was rolled back and can run
// unchanged, and a moment later the other transaction has usually committed. It returns,
// through classify, attempt's first other error, its last conflict when the retries are spent,
// or ctx's error when ctx ends while it waits.
func retryConflicts(ctx context.Context, op string, attempt func() error) error {
	err := retry.Do(ctx, conflictBackoff(), func(context.Context) error {
		err := attempt()
		if retryable(err) {
			return retry.RetryableError(err)
		}
		return err
	})
	return classify(op, err)
}

// conflictBackoff is the wait before each run again of retryConflicts: three at most, a random
// time below 10, 20 and 40 ms (full jitter, so that the two sides of a deadlock do not collide
// again in step). Each call returns a fresh sequence.
func conflictBackoff() retry.Backoff {
	return retry.WithMaxRetries(3, retry.WithFullJitter(retry.NewExponential(10*time.Millisecond)))
}
