// Package memlock is the Memcached lock of the flash-sale write-ups, behind lock.Locker, so that
// the lock zoo can show how it fails. It knows nothing about products or sales, and is never to
// protect anything the project cares about.
//
//	add key owner ttl      won if memcached stored it (NOT_STORED: someone holds it)
//	… critical section …
//	delete key             release
//
// add is atomic and carries the expiry, so it has neither of the SETNX lock's faults (a holder
// that dies between two commands, internal/lock/redisnaive). What the write-ups say breaks it,
// and what its tests show (memlock_test.go, internal/stock/memcached_test.go):
//
//   - No persistence. A memcached that restarts (a crash, a deploy, an OOM kill) comes back
//     empty: every lock is forgotten while its holders still work, and the next add wins at
//     once. Two holders; unfenced, both sell the last unit.
//   - Memcached is a cache. Under memory pressure its LRU may evict a lock item before its
//     expiry, with the same outcome as a restart, and nothing tells the holder.
//   - The expiry is in whole seconds, on memcached's own clock, which ticks once a second: an
//     item added with TTL n lives between n-1 and n seconds (TTL 1 may be gone at once).
//   - delete has no owner check. A holder paused past its TTL, or whose lock was forgotten,
//     deletes whichever lock holds the key by the time it releases: its successor's.
//
// Memcached cannot hand out a fencing token either: an incr counter lives in the same memory and
// vanishes with a restart, going back to nothing while holders of the old numbers still write.
// So each grant takes its token from Options.Tokens (internal/lock/tokens: a counter in the
// project's main Redis, which persists), after the lock was won: the project's fence lent to
// this lock. The zoo's strategy runs unfenced, as the write-ups do.
//
// With the default prefix the lock named N is the item "seckill:memlock:N". memcached keys are at
// most 250 bytes with no spaces or control characters: a name that would make a longer or
// illegal key is refused.
package memlock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/seckill-go/seckill-go/internal/lock"
)

// Defaults and bounds of Options.
const (
	DefaultTTL        = 10 * time.Second
	DefaultPrefix     = "seckill:memlock:"
	DefaultMinBackoff = lock.DefaultMinBackoff
	DefaultMaxBackoff = lock.DefaultMaxBackoff
	// MaxTTL is memcached's longest relative expiry: a larger number is read as a Unix time.
	MaxTTL = 30 * 24 * time.Hour
	// MaxKeyLen is memcached's longest key.
	MaxKeyLen = 250
)

// Tokens hands out the grants' fencing tokens (*tokens.Redis is one).
type Tokens = lock.Tokens

// Options configures a Lock. Tokens is required; the rest have defaults.
type Options struct {
	// TTL is the item's expiry, never renewed: whole seconds, from 1 s up to MaxTTL; default
	// DefaultTTL. memcached's clock ticks once a second, so the lock lives between TTL-1s and TTL.
	TTL time.Duration
	// Prefix starts every key; default DefaultPrefix. It must itself be a legal key part.
	Prefix string
	// MinBackoff and MaxBackoff bound the sleep between two tries of a waiting Acquire: it starts
	// at MinBackoff and doubles after each lost try up to MaxBackoff, each sleep drawn from its
	// upper half.
	MinBackoff, MaxBackoff time.Duration
	// OnAttempt, if set, is called after every add that reached memcached: won, or lost to a
	// holder.
	OnAttempt func(won bool)
	// Tokens gives each grant its fencing token. Required (see the package doc).
	Tokens Tokens
}

// Lock is the Memcached lock. It is safe for concurrent use and runs no goroutine.
type Lock struct {
	mc        *memcache.Client
	tokens    Tokens
	ttl       int32 // seconds
	prefix    string
	backoff   lock.Backoff
	onAttempt func(bool)
}

// New returns the lock on mc, which stays the caller's. gomemcache takes no ctx: every call is
// bounded by mc.Timeout (500 ms when zero), so set it to what a lock wait may lose to one call;
// Acquire checks ctx between calls. With several servers in mc, each lock name lives on the one
// its key hashes to.
func New(mc *memcache.Client, opts Options) (*Lock, error) {
	if mc == nil {
		return nil, errors.New("memlock: nil memcache client")
	}
	if opts.Tokens == nil {
		return nil, errors.New("memlock: no Tokens: memcached cannot keep a fencing counter across a restart")
	}
	l := &Lock{mc: mc, tokens: opts.Tokens, prefix: opts.Prefix, onAttempt: opts.OnAttempt}
	ttl := opts.TTL
	if ttl == 0 {
		ttl = DefaultTTL
	}
	if ttl < time.Second || ttl > MaxTTL || ttl%time.Second != 0 {
		return nil, fmt.Errorf("memlock: TTL %s: memcached expires items in whole seconds, from 1s to %s", opts.TTL, MaxTTL)
	}
	l.ttl = int32(ttl / time.Second)
	if l.prefix == "" {
		l.prefix = DefaultPrefix
	}
	if !legalKeyPart(l.prefix) || len(l.prefix) >= MaxKeyLen {
		return nil, fmt.Errorf("memlock: prefix %q: memcached keys have no spaces or control characters and at most %d bytes", l.prefix, MaxKeyLen)
	}
	var err error
	if l.backoff, err = (lock.Backoff{Min: opts.MinBackoff, Max: opts.MaxBackoff}).Checked(); err != nil {
		return nil, fmt.Errorf("memlock: %w", err)
	}
	if l.onAttempt == nil {
		l.onAttempt = lock.NoAttempts
	}
	return l, nil
}

// Locker returns l as a lock.Locker.
func (l *Lock) Locker() lock.Locker { return lock.Adapt[*Lease](l) }

// Key returns the memcached key of the lock called name.
func (l *Lock) Key(name string) string { return l.prefix + name }

// checkName refuses a name whose key memcached would refuse.
func (l *Lock) checkName(name string) error {
	switch key := l.Key(name); {
	case name == "":
		return errors.New("memlock: empty lock name")
	case len(key) > MaxKeyLen:
		return fmt.Errorf("memlock: lock name %q: key of %d bytes, memcached allows %d", name, len(key), MaxKeyLen)
	case !legalKeyPart(name):
		return fmt.Errorf("memlock: lock name %q: memcached keys have no spaces or control characters", name)
	}
	return nil
}

func legalKeyPart(s string) bool {
	for i := range len(s) {
		if s[i] <= ' ' || s[i] == 0x7f {
			return false
		}
	}
	return true
}

// errHeld is the outcome of an add that found the lock held.
var errHeld = errors.New("held")

// Acquire adds the lock's item until it wins or ctx ends, with back-off between tries: nothing
// wakes a waiter. It returns lock.ErrTimeout with ctx's error when ctx ends, or lock.ErrUnavailable
// instead if memcached could not be reached on the last try; a wait goes on through an outage.
func (l *Lock) Acquire(ctx context.Context, name string) (*Lease, error) {
	if err := l.checkName(name); err != nil {
		return nil, err
	}
	backoff := l.backoff.Start()
	var unreachable error // the last try's, if it did not reach memcached
	for {
		if err := ctx.Err(); err != nil {
			return nil, l.waitEnded(name, err, unreachable)
		}
		lease, err := l.try(ctx, name)
		switch {
		case err == nil:
			return lease, nil
		case errors.Is(err, lock.ErrUnavailable):
			unreachable = err
		case errors.Is(err, errHeld):
			unreachable = nil
		case ctx.Err() != nil:
			// The wait ran out during the try (the token's INCR sees ctx; the add does not).
			return nil, fmt.Errorf("%w (%v)", l.waitEnded(name, ctx.Err(), unreachable), err)
		default:
			return nil, fmt.Errorf("memlock: acquire %q: %w", name, err)
		}
		if err := backoff.Sleep(ctx); err != nil {
			return nil, l.waitEnded(name, err, unreachable)
		}
	}
}

func (l *Lock) waitEnded(name string, ctxErr, unreachable error) error {
	if unreachable != nil {
		return fmt.Errorf("memlock: acquire %q: %w: %w (%w)", name, lock.ErrUnavailable, ctxErr, unreachable)
	}
	return fmt.Errorf("memlock: acquire %q: %w: %w", name, lock.ErrTimeout, ctxErr)
}

// TryAcquire adds the lock's item once and returns lock.ErrNotAcquired if it exists.
func (l *Lock) TryAcquire(ctx context.Context, name string) (*Lease, error) {
	if err := l.checkName(name); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memlock: try %q: %w", name, err)
	}
	lease, err := l.try(ctx, name)
	switch {
	case errors.Is(err, errHeld):
		return nil, fmt.Errorf("memlock: try %q: %w", name, lock.ErrNotAcquired)
	case err != nil:
		return nil, fmt.Errorf("memlock: try %q: %w", name, err)
	}
	return lease, nil
}

func (l *Lock) try(ctx context.Context, name string) (*Lease, error) {
	key := l.Key(name)
	item := &memcache.Item{Key: key, Value: owner(), Expiration: l.ttl}
	err := retryStale(func() error { return l.mc.Add(item) })
	switch {
	case errors.Is(err, memcache.ErrNotStored):
		l.onAttempt(false)
		return nil, errHeld
	case err != nil:
		return nil, reachErr(err)
	}
	l.onAttempt(true)
	token, err := l.tokens.Next(ctx, name)
	if err != nil {
		// No token, no grant: give the lock back rather than leave it to its expiry.
		_ = l.mc.Delete(key)
		return nil, fmt.Errorf("fencing token (lock given back): %w", err)
	}
	return &Lease{l: l, key: key, token: token}, nil
}

// owner is the item's value: random, for a person reading the item; release never checks it.
func owner() []byte {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return []byte(hex.EncodeToString(b[:]))
}

// retryStale calls f again, once, when it failed on a connection that the server had closed
// before the request: gomemcache keeps idle connections, and after memcached restarts the first
// request on each fails that way without having reached anyone.
func retryStale(f func() error) error {
	err := f()
	if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		err = f()
	}
	return err
}

// reachErr marks err as lock.ErrUnavailable when the call did not get an answer from memcached:
// anything but the protocol's own replies.
func reachErr(err error) error {
	var ne net.Error
	var cte *memcache.ConnectTimeoutError
	switch {
	case errors.As(err, &ne), errors.As(err, &cte),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, memcache.ErrNoServers):
		return fmt.Errorf("%w: %w", lock.ErrUnavailable, err)
	}
	return err
}

// Lease is one grant. Nothing watches it: Lost is never closed, and Release deletes whatever
// item holds the key then.
type Lease struct {
	l        *Lock
	key      string
	token    uint64
	released atomic.Bool
}

// Token is the grant's fencing token, from Options.Tokens.
func (g *Lease) Token() uint64 { return g.token }

// Lost is never closed: the holder is not told when its item expired, was evicted, or was
// forgotten by a restart.
func (g *Lease) Lost() <-chan struct{} { return lock.NeverLost() }

// Release deletes the lock's item, as the write-ups do: with no owner check, so after this
// grant's expiry, eviction or a restart it deletes the successor's lock if there is one. It
// returns lock.ErrNotHeld if there was no item to delete, or if this Lease was released before
// (a second Release does not reach memcached, so it at least cannot delete a successor's lock).
// gomemcache takes no ctx: the delete is bounded by the client's Timeout.
func (g *Lease) Release(ctx context.Context) error {
	if g.released.Swap(true) {
		return fmt.Errorf("memlock: release %s: released before: %w", g.key, lock.ErrNotHeld)
	}
	if err := ctx.Err(); err != nil {
		g.released.Store(false)
		return fmt.Errorf("memlock: release %s: %w", g.key, err)
	}
	err := retryStale(func() error { return g.l.mc.Delete(g.key) })
	switch {
	case errors.Is(err, memcache.ErrCacheMiss):
		return fmt.Errorf("memlock: release %s: %w", g.key, lock.ErrNotHeld)
	case err != nil:
		g.released.Store(false) // not released: the holder may try again
		return fmt.Errorf("memlock: release %s: %w", g.key, reachErr(err))
	}
	return nil
}

var _ lock.Lease = (*Lease)(nil)
