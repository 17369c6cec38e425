// Package mysqllock is the lock table: a mutual-exclusion lock kept as rows of one MySQL/MariaDB
// table. It lets processes that already share a database take turns at a critical section named
// by a string, and hands every grant a fencing token. It knows nothing about products or sales,
// and needs nothing but database/sql and the table it creates (EnsureTable).
//
// # The lock table of the write-ups
//
// A row inserted under a unique index on the lock's name IS the lock: the insert that succeeds
// holds it, an insert that fails with a duplicate key (error 1062) finds it held, and deleting the
// row unlocks. What the write-ups say breaks it (Options.Naive keeps all of it, on purpose):
//
//   - No expiry: a holder that dies (SIGKILL, a lost host) leaves its row for ever, and every
//     later caller waits for it until a person deletes it (ForceRelease).
//   - Insert is non-blocking: there is nobody to wake a waiter; callers must spin.
//   - Not re-entrant: a holder that asks again waits for itself (in shipped mode too, until its
//     ctx ends: its own watchdog keeps the row alive).
//   - Release deletes by name, so a holder that lost the lock deletes someone else's.
//
// # What this implementation adds
//
//   - Expiry and a reaper. Each row carries expires_at = now + Options.TTL, on the database's clock
//     only (UTC_TIMESTAMP(6), so sessions with different time zones agree). A caller that finds the
//     lock held deletes the row if it has expired (`DELETE … WHERE name = ? AND expires_at < now`,
//     atomic per row: a live holder's row is never touched): dead holders are reaped by whoever
//     waits. While a Lease is held, a watchdog moves its expiry on every TTL/3; when a renewal
//     finds the row gone or expired, or none succeeds before the lease would have run out
//     (counted from before the insert or the last renewal was sent, on the safe side), Lost()
//     closes.
//   - An owner: 128 random bits per grant (crypto/rand.Text). Renewal and Release touch only `WHERE id = ? AND owner
//     = ?`, so a holder that lost the lock can neither extend nor delete the next holder's.
//   - Waiting with jittered exponential back-off (Options.MinBackoff to MaxBackoff), honouring
//     ctx: spinning is what a lock the server cannot wait on costs, and the back-off bounds it.
//     Waiting is not fair, and Options.OnAttempt counts the tries it wastes.
//   - The row's AUTO_INCREMENT id as the fencing token (see Fencing tokens).
//
// A lease is advisory, like every lock lease: a holder paused past its TTL is reaped and another
// is granted while the first still believes it holds. Only the storage-side token check stops
// the first one's writes (`UPDATE … WHERE fence_token < ?`).
//
// # Fencing tokens
//
// The token of a grant is the id its insert was given (LAST_INSERT_ID). InnoDB hands ids out from
// one counter per table, never twice, so the tokens of one name increase from grant to grant
// (failed inserts burn ids too: tokens have gaps, which a fence does not mind). Since MariaDB 10.2
// and MySQL 8.0 the counter survives a restart; before, a restart reset it to max(id)+1, which,
// with every row deleted, sends tokens back, and the storage's fence then refuses every holder
// until its stored token is reset: safe, but stalled.
//
// The order of ids is the order of allocation, and InnoDB allocates an id before it checks the
// unique index. An insert that allocated id 10, then was held up (a descheduled server thread)
// while another allocated 11, was granted, and released, succeeds later with the smaller token.
// innodb_autoinc_lock_mode decides whether that can happen: at 0 ("traditional") every insert
// holds the table's AUTO-INC lock to the end of its statement, so allocation and the unique check
// happen as one and ids follow the order of grants; at 1 ("consecutive", MariaDB's default) a
// simple `INSERT … VALUES` allocates under a short mutex and lets go before the check, but an
// `INSERT … SELECT` still holds the AUTO-INC lock to the end of its statement (and simple inserts
// wait behind it: TestInsertSelectHoldsTheAutoIncLock, on MariaDB 10.11); at 2 ("interleaved",
// MySQL 8.0's default) nothing does. This package inserts with INSERT … SELECT, so at 0 and 1
// tokens follow grants. At 2 the corner remains, and is safe: the late holder still excludes
// everyone (its row is the lock), but the storage's fence refuses its smaller token, so its batch
// sells nothing. The price of the AUTO-INC lock is that inserts into the lock table, whatever
// their name, run one at a time; each is a single row.
//
// # Failing
//
// A call the server answered with an error other than contention is returned as it is. A call
// that did not reach the server (a dial error, a broken connection, a closed pool), or an insert
// the server left unanswered for TryTimeout, returns an error matching lock.ErrUnavailable at once:
// a caller should tell an unreachable database from a busy lock.
//
// An insert is never cut short by the caller's ctx: cut, its row may be made all the same, by a
// server thread that carries on after the client hung up, and that row, whose id and owner nobody
// knows, would block the name for a TTL (in naive mode for ever, as a dead holder's). So the try
// in flight when ctx ends runs to its end (TryTimeout at most), and a grant that comes too late is
// deleted at once. A ctx that ends while the database hangs is therefore answered up to
// TryTimeout late.
//
// The watchdog, the reaper and the waiters use the pool they are given: a pool exhausted by other
// work delays renewals, and a lease whose renewals are late past the TTL is lost. Give the lock
// table connections to spare.
package mysqllock

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill-go/seckill-go/internal/lock"
)

// Defaults of Options.
const (
	DefaultTable      = "lock_table"
	DefaultTTL        = 10 * time.Second
	DefaultMinBackoff = lock.DefaultMinBackoff
	DefaultMaxBackoff = lock.DefaultMaxBackoff
	// MinTTL is the shortest lease New accepts: the watchdog renews every TTL/3, one round trip
	// each.
	MinTTL = 30 * time.Millisecond
	// MaxNameLen is the longest lock name, in characters: the unique index is on a VARCHAR(191)
	// (191 four-byte characters fit InnoDB's oldest index-prefix limit of 767 bytes). A longer name
	// is refused rather than truncated: two names truncated alike would be one lock.
	MaxNameLen = 191
	// TryTimeout bounds an insert, which the caller's ctx does not cut (see Failing): a database
	// that does not answer one in this time is taken for unreachable.
	TryTimeout = 5 * time.Second
)

// Options configures a Client. The zero value is valid.
type Options struct {
	// Table is the lock table's name; default DefaultTable. Letters, digits and underscores only.
	Table string
	// TTL is how long a grant outlives a holder that stops renewing it (dies, stalls, loses the
	// database): after it, the next caller reaps the row. Renewed every TTL/3 while held. Default
	// DefaultTTL, at least MinTTL, in whole microseconds. Ignored in naive mode.
	TTL time.Duration
	// MinBackoff and MaxBackoff bound the sleep between two tries of a waiting Acquire: it starts
	// at MinBackoff, doubles after each lost try up to MaxBackoff, and each sleep is drawn from
	// its upper half. Defaults DefaultMinBackoff and DefaultMaxBackoff.
	MinBackoff, MaxBackoff time.Duration
	// Naive makes the lock the write-ups' lock table: no expiry, no owner, no reaper, no watchdog,
	// and Release deletes by name. A holder that dies blocks the name until ForceRelease. Kept to
	// show what fails; never use it to protect anything.
	Naive bool
	// OnAttempt, if set, is called after every insert that reached the server: won, or lost to a
	// holder (a wasted try). It must be quick and safe for concurrent use.
	OnAttempt func(won bool)
	// Logger receives lost leases and failed renewals; default discards.
	Logger *slog.Logger
}

// Client acquires locks in one lock table. It is safe for concurrent use and runs no goroutine of
// its own: only its leases' watchdogs, which Release stops.
type Client struct {
	db        *sql.DB
	table     string
	ttl       time.Duration // 0 in naive mode
	backoff   lock.Backoff
	naive     bool
	onAttempt func(won bool)
	log       *slog.Logger
	q         queries
}

// queries are the client's statements, with its table's name in them.
type queries struct {
	create, insert, reap, renew, release, releaseByName, undo string
}

var tableName = regexp.MustCompile(`^[A-Za-z0-9_]{1,64}$`)

// New returns a Client on db, a pool of one MySQL or MariaDB database (the table lives in that
// database). db stays the caller's to close, after every Lease is released. Call EnsureTable once
// before the first lock, unless the table is known to exist.
func New(db *sql.DB, opts Options) (*Client, error) {
	if db == nil {
		return nil, errors.New("mysqllock: nil database")
	}
	c := &Client{db: db, table: opts.Table, naive: opts.Naive, onAttempt: opts.OnAttempt, log: opts.Logger}
	if c.table == "" {
		c.table = DefaultTable
	}
	if !tableName.MatchString(c.table) {
		return nil, fmt.Errorf("mysqllock: table name %q: letters, digits and underscores only, at most 64", c.table)
	}
	var err error
	if !c.naive {
		if c.ttl, err = lock.LeaseTTL(opts.TTL, time.Microsecond, DefaultTTL, MinTTL); err != nil {
			return nil, fmt.Errorf("mysqllock: %w", err)
		}
	}
	if c.backoff, err = (lock.Backoff{Min: opts.MinBackoff, Max: opts.MaxBackoff}).Checked(); err != nil {
		return nil, fmt.Errorf("mysqllock: %w", err)
	}
	if c.onAttempt == nil {
		c.onAttempt = lock.NoAttempts
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	t := "`" + c.table + "`"
	c.q = queries{
		// name compares byte for byte (utf8mb4_bin): "Product-1" and "product-1" are two locks.
		create: "CREATE TABLE IF NOT EXISTS " + t + ` (
  id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  name        VARCHAR(191) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  owner       VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NULL,
  expires_at  DATETIME(6) NULL,
  acquired_at DATETIME(6) NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_lock_name (name)
) ENGINE=InnoDB`,
		// INSERT … SELECT, not VALUES: it holds the AUTO-INC lock through the unique check (see
		// Fencing tokens). A NULL interval (naive mode) makes a NULL expiry.
		insert: "INSERT INTO " + t + " (name, owner, expires_at, acquired_at) " +
			"SELECT ?, ?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, UTC_TIMESTAMP(6)",
		reap: "DELETE FROM " + t + " WHERE name = ? AND expires_at < UTC_TIMESTAMP(6)",
		// An expired row is not renewed even if nobody has reaped it yet: expired is gone.
		renew: "UPDATE " + t + " SET expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND " +
			"WHERE id = ? AND owner = ? AND expires_at >= UTC_TIMESTAMP(6)",
		release:       "DELETE FROM " + t + " WHERE id = ? AND owner = ?",
		undo:          "DELETE FROM " + t + " WHERE id = ?", // ids are never reused
		releaseByName: "DELETE FROM " + t + " WHERE name = ?",
	}
	return c, nil
}

// EnsureTable creates the lock table if it does not exist. It is idempotent and safe to call
// from several processes at once.
func (c *Client) EnsureTable(ctx context.Context) error {
	if _, err := c.db.ExecContext(ctx, c.q.create); err != nil {
		return fmt.Errorf("mysqllock: create table %s: %w", c.table, err)
	}
	return nil
}

// Table returns the lock table's name.
func (c *Client) Table() string { return c.table }

// Locker returns c as a lock.Locker, for code that accepts any lock implementation.
func (c *Client) Locker() lock.Locker { return lock.Adapt[*Lease](c) }

// MySQL error numbers this package tells apart.
const (
	errDupEntry        = 1062
	errLockWaitTimeout = 1205
	errDeadlock        = 1213
)

// errHeld is the outcome of a try that found the lock held.
var errHeld = errors.New("held")

func checkName(name string) error {
	switch {
	case name == "":
		return errors.New("mysqllock: empty lock name")
	case !utf8.ValidString(name) || utf8.RuneCountInString(name) > MaxNameLen:
		return fmt.Errorf("mysqllock: lock name %.20q…: not UTF-8, or longer than %d characters", name, MaxNameLen)
	}
	return nil
}

// Acquire blocks until it holds the lock called name and returns the grant. When ctx ends first
// it returns an error matching both lock.ErrTimeout and ctx.Err(). When the database cannot be
// reached it returns at once an error matching lock.ErrUnavailable (see Failing). It is not
// re-entrant: a second Acquire of a name this process holds waits like any other.
func (c *Client) Acquire(ctx context.Context, name string) (*Lease, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	backoff := c.backoff.Start()
	for {
		if err := ctx.Err(); err != nil { // database/sql would send the insert anyway
			return nil, fmt.Errorf("mysqllock: acquire %q: %w: %w", name, lock.ErrTimeout, err)
		}
		lease, reaped, err := c.try(ctx, name)
		switch {
		case err == nil:
			return lease, nil
		case !errors.Is(err, errHeld):
			return nil, c.acquireErr(ctx, name, err)
		case reaped:
			continue // a dead holder's row is gone: try again at once
		}
		if err := backoff.Sleep(ctx); err != nil {
			return nil, fmt.Errorf("mysqllock: acquire %q: %w: %w", name, lock.ErrTimeout, err)
		}
	}
}

// acquireErr is the error of an Acquire or TryAcquire of name whose call failed with err.
func (c *Client) acquireErr(ctx context.Context, name string, err error) error {
	switch {
	case errors.Is(err, lock.ErrUnavailable):
	case ctx.Err() != nil: // the caller left, or its wait ran out, during a try
		err = fmt.Errorf("%w: %w", lock.ErrTimeout, ctx.Err())
	}
	return fmt.Errorf("mysqllock: acquire %q: %w", name, err)
}

// TryAcquire takes the lock called name if it is free (or held by an expired grant, which it
// reaps) and returns an error matching lock.ErrNotAcquired if someone holds it.
func (c *Client) TryAcquire(ctx context.Context, name string) (*Lease, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("mysqllock: try %q: %w", name, err)
	}
	lease, reaped, err := c.try(ctx, name)
	if errors.Is(err, errHeld) && reaped {
		lease, _, err = c.try(ctx, name)
	}
	switch {
	case errors.Is(err, errHeld):
		return nil, fmt.Errorf("mysqllock: try %q: %w", name, lock.ErrNotAcquired)
	case err != nil:
		return nil, c.acquireErr(ctx, name, err)
	}
	return lease, nil
}

// try inserts the lock's row once. It returns the lease, or errHeld (and, in shipped mode,
// whether it reaped an expired holder's row, so that the lock may be free now), or the error of a
// call that failed.
func (c *Client) try(ctx context.Context, name string) (lease *Lease, reaped bool, err error) {
	var owner, micros any // NULL in naive mode
	if !c.naive {
		owner, micros = rand.Text(), c.ttl.Microseconds()
	}
	sent := time.Now()
	// Not cut by ctx (see Failing): its outcome must be known.
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), TryTimeout)
	defer cancel()
	res, err := c.db.ExecContext(ictx, c.q.insert, name, owner, micros)
	if err == nil {
		var id int64
		if id, err = res.LastInsertId(); err != nil || id <= 0 {
			// Cannot happen with a MySQL driver; the row is left to expire.
			return nil, false, fmt.Errorf("no LAST_INSERT_ID (%d): %w", id, err)
		}
		c.onAttempt(true)
		if err := ctx.Err(); err != nil { // granted after the caller left: give it back
			if _, err := c.db.ExecContext(ictx, c.q.undo, id); err != nil {
				c.log.WarnContext(ctx, "mysqllock: could not delete a grant made too late", "lock", name, "token", id, "err", err)
			}
			return nil, false, err
		}
		return c.newLease(ctx, name, owner, uint64(id), sent), false, nil
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return nil, false, fmt.Errorf("%w: no answer to an insert within %s: %w", lock.ErrUnavailable, TryTimeout, err)
	case !contended(err):
		return nil, false, reachErr(err)
	}
	c.onAttempt(false)
	if c.naive || mysqlErrNo(err) != errDupEntry {
		return nil, false, errHeld
	}
	res, err = c.db.ExecContext(ctx, c.q.reap, name)
	if err != nil {
		if contended(err) {
			return nil, false, errHeld // someone else is at the row: the next try sees
		}
		return nil, false, reachErr(err)
	}
	if n, _ := res.RowsAffected(); n > 0 {
		c.log.InfoContext(ctx, "mysqllock: reaped an expired grant", "lock", name)
		return nil, true, errHeld
	}
	return nil, false, errHeld
}

// contended reports whether err is a try lost to another holder or waiter: the name's row exists
// (1062), or the statement was chosen as a deadlock victim or timed out on a row lock. The last
// two happen when inserts of one name meet a delete of it (InnoDB's inserts of a just-deleted key
// take a shared lock and then want an exclusive one) and only mean: try again.
func contended(err error) bool {
	switch mysqlErrNo(err) {
	case errDupEntry, errDeadlock, errLockWaitTimeout:
		return true
	}
	return false
}

func mysqlErrNo(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

// reachErr marks err as lock.ErrUnavailable unless the server answered it or it is a ctx error.
func reachErr(err error) error {
	var me *mysql.MySQLError
	if errors.As(err, &me) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w: %w", lock.ErrUnavailable, err)
}

// ForceRelease deletes the lock called name whoever holds it, and returns an error matching
// lock.ErrNotHeld if nobody did. It is what a person does when a naive lock's holder died and the
// sale stalls (`DELETE FROM lock_table WHERE name = …`): the holder, if it is alive after all, is
// not told, and its writes are the storage's fence's to refuse.
func (c *Client) ForceRelease(ctx context.Context, name string) error {
	res, err := c.db.ExecContext(ctx, c.q.releaseByName, name)
	if err != nil {
		return fmt.Errorf("mysqllock: force release %q: %w", name, reachErr(err))
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("mysqllock: force release %q: %w", name, lock.ErrNotHeld)
	}
	c.log.WarnContext(ctx, "mysqllock: lock released by force", "lock", name)
	return nil
}
