package redislock_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/lock"
	"github.com/seckill-go/seckill-go/internal/lock/locktest"
	"github.com/seckill-go/seckill-go/internal/lock/redislock"
	"github.com/seckill-go/seckill-go/internal/redisconn"
)

func TestContract(t *testing.T) {
	rdb := itest.Redis(t)
	prefix := testPrefix(t) // one for the suite: its expiry case takes a name over from a second Locker
	// names spells the suite's keys, for Waiting.
	names := newClient(t, rdb, redislock.Options{Prefix: prefix})
	locktest.Run(t, locktest.Suite{
		New: func(t *testing.T) lock.Locker {
			return newClient(t, rdb, redislock.Options{TTL: time.Second, Prefix: prefix}).Locker()
		},
		Expire: func(t *testing.T, l lock.Lease) {
			lease := l.(*redislock.Lease)
			redislock.StallRenewal(lease)
			if err := rdb.PExpire(t.Context(), redislock.LeaseKey(lease), time.Millisecond).Err(); err != nil {
				t.Fatalf("PEXPIRE: %v", err)
			}
		},
		Waiting: func(t *testing.T, name string) bool {
			_, _, channel := redislock.Keys(names, name)
			return subscribers(t, rdb, channel) > 0
		},
	})
}

func TestNewOptions(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: itest.RedisAddr}) // never used for I/O
	t.Cleanup(func() { _ = rdb.Close() })
	type settings struct{ TTL, Recheck time.Duration }
	for _, tc := range []struct {
		name string
		opts redislock.Options
		want settings
	}{
		{"defaults", redislock.Options{}, settings{10 * time.Second, time.Second}},
		{"short lease: recheck floor", redislock.Options{TTL: 200 * time.Millisecond}, settings{200 * time.Millisecond, 100 * time.Millisecond}},
		{"recheck is a tenth of the lease", redislock.Options{TTL: 5 * time.Second}, settings{5 * time.Second, 500 * time.Millisecond}},
		{"long lease: recheck ceiling", redislock.Options{TTL: time.Minute}, settings{time.Minute, time.Second}},
		{"explicit recheck", redislock.Options{TTL: time.Second, Recheck: 10 * time.Second}, settings{time.Second, 10 * time.Second}},
		{"lease in whole milliseconds", redislock.Options{TTL: 1500500 * time.Microsecond}, settings{1500 * time.Millisecond, 150 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := redislock.New(rdb, tc.opts)
			if err != nil {
				t.Fatalf("New = %v", err)
			}
			var got settings
			got.TTL, got.Recheck = redislock.Settings(c)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("settings (-want +got):\n%s", diff)
			}
		})
	}
	for _, tc := range []struct {
		name string
		rdb  redis.UniversalClient
		opts redislock.Options
	}{
		{"nil client", nil, redislock.Options{}},
		{"lease too short", rdb, redislock.Options{TTL: 5 * time.Millisecond}},
		{"negative lease", rdb, redislock.Options{TTL: -time.Second}},
		{"negative recheck", rdb, redislock.Options{Recheck: -time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := redislock.New(tc.rdb, tc.opts); err == nil {
				t.Fatal("New accepted invalid options")
			}
		})
	}
}

// A call whose ctx has already ended takes nothing, even a free lock.
func TestEndedContext(t *testing.T) {
	t.Parallel()
	c := newClient(t, itest.Redis(t), redislock.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Acquire(ctx, "ended"); !errors.Is(err, lock.ErrTimeout) || !errors.Is(err, context.Canceled) {
		t.Errorf("Acquire with an ended ctx = %v, want ErrTimeout and context.Canceled", err)
	}
	if _, err := c.TryAcquire(ctx, "ended"); !errors.Is(err, context.Canceled) {
		t.Errorf("TryAcquire with an ended ctx = %v, want context.Canceled", err)
	}
	mustRelease(t, mustAcquire(t, c, "ended")) // nothing was left held
}

func TestEmptyName(t *testing.T) {
	t.Parallel()
	c := newClient(t, itest.Redis(t), redislock.Options{})
	if _, err := c.Acquire(t.Context(), ""); err == nil {
		t.Error("Acquire of an empty name succeeded")
	}
	if _, err := c.TryAcquire(t.Context(), ""); err == nil {
		t.Error("TryAcquire of an empty name succeeded")
	}
}

// A lease renewed every TTL/3 outlives a critical section of 5×TTL, and nobody else gets the
// lock meanwhile.
func TestRenewalKeepsLease(t *testing.T) {
	t.Parallel()
	const ttl = 200 * time.Millisecond
	rdb := itest.Redis(t)
	c := newClient(t, rdb, redislock.Options{TTL: ttl})
	other, err := redislock.New(itest.Redis(t), redislock.Options{TTL: ttl, Prefix: mustPrefix(t, c)})
	if err != nil {
		t.Fatal(err)
	}
	a := mustAcquire(t, c, "long")
	key, _, _ := redislock.Keys(c, "long")
	for end := time.Now().Add(5 * ttl); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if l, err := other.TryAcquire(t.Context(), "long"); !errors.Is(err, lock.ErrNotAcquired) {
			if l != nil {
				t.Errorf("another client got the lock during the critical section (token %d after %d)", l.Token(), a.Token())
				mustRelease(t, l)
			}
			t.Fatalf("TryAcquire during the critical section = %v, want ErrNotAcquired", err)
		}
		if pttl := rdb.PTTL(t.Context(), key).Val(); pttl <= 0 || pttl > ttl {
			t.Fatalf("PTTL of the held key = %s, want in (0, %s]", pttl, ttl)
		}
		if locktest.IsClosed(a.Lost()) {
			t.Fatal("Lost() closed while the lease was being renewed")
		}
	}
	mustRelease(t, a)
}

// mustPrefix recovers c's key prefix, so that a second client shares its locks.
func mustPrefix(t *testing.T, c *redislock.Client) string {
	t.Helper()
	key, _, _ := redislock.Keys(c, "x")
	return key[:len(key)-len("{x}")]
}

// Lost closes when renewal becomes impossible, and Release then refuses without touching
// whoever holds the key now.
func TestLost(t *testing.T) {
	t.Parallel()
	const ttl = 300 * time.Millisecond
	for _, tc := range []struct {
		name    string
		meddle  func(ctx context.Context, rdb redis.UniversalClient, key string) error
		holder  string // the key's value afterwards; "" for none
		release bool   // Release at once, before renewal could notice
	}{
		{
			name:   "key deleted by someone else",
			meddle: func(ctx context.Context, rdb redis.UniversalClient, key string) error { return rdb.Del(ctx, key).Err() },
		},
		{
			name: "key taken over by another owner",
			meddle: func(ctx context.Context, rdb redis.UniversalClient, key string) error {
				return rdb.Set(ctx, key, "intruder", time.Minute).Err()
			},
			holder: "intruder",
		},
		{
			name:    "release finds the key gone",
			meddle:  func(ctx context.Context, rdb redis.UniversalClient, key string) error { return rdb.Del(ctx, key).Err() },
			release: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rdb := itest.Redis(t)
			c := newClient(t, rdb, redislock.Options{TTL: ttl})
			a := mustAcquire(t, c, "meddled")
			key, _, _ := redislock.Keys(c, "meddled")
			if tc.release {
				redislock.StallRenewal(a)
			}
			if err := tc.meddle(t.Context(), rdb, key); err != nil {
				t.Fatal(err)
			}
			if !tc.release {
				select {
				case <-a.Lost():
				case <-time.After(10 * ttl):
					t.Fatalf("Lost() still open %s after the key was meddled with", 10*ttl)
				}
			}
			if err := a.Release(t.Context()); !errors.Is(err, lock.ErrNotHeld) {
				t.Fatalf("Release = %v, want ErrNotHeld", err)
			}
			if !locktest.IsClosed(a.Lost()) {
				t.Fatal("Lost() open after Release found the lease gone")
			}
			got, err := rdb.Get(t.Context(), key).Result()
			if errors.Is(err, redis.Nil) {
				got, err = "", nil
			}
			if err != nil || got != tc.holder {
				t.Fatalf("key after Release = %q, %v; want %q", got, err, tc.holder)
			}
		})
	}
}

// When Redis cannot be reached, Lost closes once the lease would have run out, and the key
// expires by itself.
func TestLostWhenRedisUnreachable(t *testing.T) {
	t.Parallel()
	const ttl = 300 * time.Millisecond
	rdb := redisconn.Open(itest.RedisTopology, redis.UniversalOptions{}) // closed below
	c := newClient(t, rdb, redislock.Options{TTL: ttl})
	a := mustAcquire(t, c, "cut-off")
	start := time.Now()
	_ = rdb.Close() // every later call fails at once: "redis: client is closed"
	select {
	case <-a.Lost():
		if waited := time.Since(start); waited > 3*ttl {
			t.Errorf("Lost() closed %s after Redis became unreachable; the lease was %s", waited, ttl)
		}
	case <-time.After(10 * ttl):
		t.Fatalf("Lost() still open %s after Redis became unreachable", 10*ttl)
	}
	if err := a.Release(t.Context()); err == nil || errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Release without Redis = %v, want the client's error", err)
	}
	other := newClient(t, itest.Redis(t), redislock.Options{TTL: ttl, Prefix: mustPrefix(t, c)})
	itest.Eventually(t, 10*ttl, func() (bool, string) {
		l, err := other.TryAcquire(t.Context(), "cut-off")
		if err != nil {
			return false, err.Error()
		}
		mustRelease(t, l)
		return true, ""
	})
}

// While Redis cannot be reached, the lock fails fast: a waiter gives up, and every new Acquire or
// TryAcquire refuses, with ErrUnavailable (a buyer's 503, not a busy lock's 429) in milliseconds
// instead of at the end of its wait; once Redis answers again the Client recovers by itself.
// The go-redis client is set up as the app's lock client is (one dial attempt, one retry).
func TestFailFastWhileUnreachable(t *testing.T) {
	t.Parallel()
	itest.SingleRedis(t)
	proxy := itest.NewProxy(t, itest.RedisAddr)
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), DialerRetries: 1, MaxRetries: 1})
	t.Cleanup(func() { _ = rdb.Close() })
	c := newClient(t, rdb, redislock.Options{TTL: 5 * time.Second})
	holder := newClient(t, itest.Redis(t), redislock.Options{TTL: 5 * time.Second, Prefix: mustPrefix(t, c)})
	held := mustAcquire(t, holder, "held")
	_, _, channel := redislock.Keys(c, "held")

	// Bounds far above what is expected, far below the waits the calls are given (30 s): a
	// liveness claim that holds on a busy CI machine. A waiter notices at its next re-check
	// (TTL/10 here) unless another call noticed first.
	_, recheck := redislock.Settings(c)
	giveUpWithin, refuseWithin := recheck+2*time.Second, 250*time.Millisecond
	acquire := func(f func(context.Context, string) (*redislock.Lease, error), name string) (time.Duration, error) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		start := time.Now()
		l, err := f(ctx, name)
		if l != nil {
			t.Errorf("granted a lease while Redis is unreachable")
		}
		return time.Since(start), err
	}
	unavailable := func(what string, took time.Duration, err error, within time.Duration) {
		t.Helper()
		if !errors.Is(err, lock.ErrUnavailable) || errors.Is(err, lock.ErrTimeout) {
			t.Fatalf("%s = %v, want ErrUnavailable (not ErrTimeout)", what, err)
		}
		if took > within {
			t.Errorf("%s refused after %s, want within %s", what, took, within)
		}
		t.Logf("%s: ErrUnavailable after %s", what, took.Round(time.Microsecond))
	}

	waiter := make(chan error, 1)
	go func() {
		_, err := acquire(c.Acquire, "held")
		waiter <- err
	}()
	itest.Eventually(t, 10*time.Second, func() (bool, string) {
		return subscribers(t, itest.Redis(t), channel) > 0, "the waiter never subscribed"
	})
	cut := time.Now()
	proxy.Cut()
	select {
	case err := <-waiter:
		unavailable("a waiter when Redis went away", time.Since(cut), err, giveUpWithin)
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter still waits 10 s after Redis went away")
	}
	for i := range 3 {
		took, err := acquire(c.Acquire, "free")
		unavailable("Acquire while unreachable #"+strconv.Itoa(i+1), took, err, refuseWithin)
	}
	took, err := acquire(c.TryAcquire, "free")
	unavailable("TryAcquire while unreachable", took, err, refuseWithin)

	mustRelease(t, held)
	proxy.Heal()
	healed := time.Now()
	itest.Eventually(t, 10*time.Second, func() (bool, string) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		l, err := c.Acquire(ctx, "held")
		if err != nil {
			return false, err.Error()
		}
		mustRelease(t, l)
		return true, ""
	})
	t.Logf("acquired again %s after Redis came back", time.Since(healed).Round(time.Millisecond))
}

func TestTokens(t *testing.T) {
	t.Parallel()
	rdb := itest.Redis(t)
	c := newClient(t, rdb, redislock.Options{})
	_, fence, _ := redislock.Keys(c, "tokens")
	ctx := t.Context()

	grant := func() uint64 {
		t.Helper()
		l := mustAcquire(t, c, "tokens")
		mustRelease(t, l)
		if got, err := rdb.Get(ctx, fence).Uint64(); err != nil || got != l.Token() {
			t.Fatalf("fence counter = %d, %v; want the last token %d", got, err, l.Token())
		}
		return l.Token()
	}
	serverMicros := func() uint64 {
		t.Helper()
		now, err := rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		return uint64(now.UnixMicro())
	}

	// A token is the server clock in microseconds, or the last token + 1 if that is larger.
	before := serverMicros()
	last := grant()
	if after := serverMicros(); last < before || last > after {
		t.Fatalf("first token %d is not the server time in µs (between %d and %d)", last, before, after)
	}
	check := func(what string, tok uint64) {
		t.Helper()
		if tok <= last {
			t.Fatalf("%s: token %d after %d; tokens must strictly increase", what, tok, last)
		}
		last = tok
	}
	for range 100 {
		before := serverMicros()
		tok := grant()
		if tok < before {
			t.Fatalf("token %d is below the server time %d µs at the grant", tok, before)
		}
		check("grant", tok)
	}
	// The counter is lost (restart without persistence, FLUSHALL, eviction) or rolled back
	// (failover to a lagging replica) several times.
	for i := range 3 {
		if err := rdb.Del(ctx, fence).Err(); err != nil {
			t.Fatal(err)
		}
		check("after the fence counter was lost", grant())
		check("the grant after that", grant())
		if i == 0 {
			// A counter that restarted from scratch, and one rolled back by a few grants.
			if err := rdb.Set(ctx, fence, 0, 0).Err(); err != nil {
				t.Fatal(err)
			}
			check("after the fence counter was reset to 0", grant())
			if err := rdb.Set(ctx, fence, last-5, 0).Err(); err != nil {
				t.Fatal(err)
			}
			check("after the fence counter was rolled back", grant())
		}
	}
	// A counter ahead of the clock (as after a burst of grants) counts on by one.
	ahead := last + 1_000_000_000
	if err := rdb.Set(ctx, fence, ahead, 0).Err(); err != nil {
		t.Fatal(err)
	}
	last = ahead
	if tok := grant(); tok != ahead+1 {
		t.Fatalf("token %d with the counter at %d ahead of the clock; want %d", tok, ahead, ahead+1)
	}
}

// A waiter is woken by the release, not by polling: with a re-check of 10 s and a 10 s lease,
// only the notification can hand it the lock within seconds.
func TestWaiterWokenByRelease(t *testing.T) {
	t.Parallel()
	// KeepSubscribed short: the end of the subscription is checked below, and the default (5 s)
	// would race that check's own 5 s.
	opts := redislock.Options{TTL: 10 * time.Second, Recheck: 10 * time.Second, KeepSubscribed: 100 * time.Millisecond}
	rdb := itest.Redis(t)
	c := newClient(t, rdb, opts)
	_, _, channel := redislock.Keys(c, "wake")
	hook := &counter{isAcquire: isOurAcquire}
	opts.Prefix = mustPrefix(t, c)
	waiter := newClient(t, itest.Redis(t, hook), opts)

	a := mustAcquire(t, c, "wake")
	type result struct {
		lease *redislock.Lease
		err   error
		at    time.Time
	}
	got := make(chan result, 1)
	go func() {
		l, err := waiter.Acquire(t.Context(), "wake")
		got <- result{l, err, time.Now()}
	}()
	// The waiter tried, subscribed and tried again: it is asleep until a notification.
	itest.Eventually(t, 5*time.Second, func() (bool, string) {
		n := subscribers(t, rdb, channel)
		return n == 1 && hook.acquires.Load() >= 2, "waiter not subscribed and retried yet"
	})
	released := time.Now()
	mustRelease(t, a)
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatalf("waiter: %v", r.err)
		}
		if took := r.at.Sub(released); took > 5*time.Second {
			t.Errorf("waiter got the lock %s after the release", took)
		}
		if n := hook.acquires.Load(); n != 3 {
			t.Errorf("waiter ran the acquire script %d times, want 3 (try, try after subscribing, try when woken)", n)
		}
		mustRelease(t, r.lease)
	case <-time.After(8 * time.Second):
		t.Fatal("waiter still waiting 8 s after the release: it was not woken")
	}
	itest.Eventually(t, 5*time.Second, func() (bool, string) {
		return subscribers(t, rdb, channel) == 0, "the waiter's subscription outlived its wait"
	})
}

// A holder that dies without releasing is taken over once its key expires, thanks to the
// re-check bounded by the key's PTTL, although the re-check interval is much longer.
func TestDeadHolderTakenOver(t *testing.T) {
	t.Parallel()
	const ttl = 300 * time.Millisecond
	opts := redislock.Options{TTL: ttl, Recheck: 10 * time.Second}
	c := newClient(t, itest.Redis(t), opts)
	opts.Prefix = mustPrefix(t, c)
	waiter := newClient(t, itest.Redis(t), opts)

	a := mustAcquire(t, c, "dead")
	time.Sleep(ttl)           // a few extensions, then
	redislock.StallRenewal(a) // the holder's process stops: no renewal, no release
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	b, err := waiter.Acquire(ctx, "dead")
	if err != nil {
		t.Fatalf("Acquire after the holder died = %v", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("took over %s after the holder died; its lease was %s", took, ttl)
	}
	if b.Token() <= a.Token() {
		t.Errorf("token %d after the dead holder's %d", b.Token(), a.Token())
	}
	select {
	case <-a.Lost():
	case <-time.After(10 * ttl):
		t.Error("the dead holder's Lost() still open")
	}
	if err := a.Release(t.Context()); !errors.Is(err, lock.ErrNotHeld) {
		t.Errorf("the dead holder's Release = %v, want ErrNotHeld", err)
	}
	if locktest.IsClosed(b.Lost()) {
		t.Error("the new holder's lease is lost")
	}
	mustRelease(t, b)
}

// Cancelling a wait returns promptly with ErrTimeout and leaves no subscription behind once
// KeepSubscribed has passed.
func TestCancelWhileWaiting(t *testing.T) {
	t.Parallel()
	itest.SingleRedis(t) // PoolStats counts Pub/Sub connections of one server's client
	holderRedis := itest.Redis(t)
	c := newClient(t, holderRedis, redislock.Options{Recheck: 10 * time.Second})
	_, _, channel := redislock.Keys(c, "cancel")
	waiterRedis := itest.Redis(t)
	waiter := newClient(t, waiterRedis, redislock.Options{Prefix: mustPrefix(t, c), Recheck: 10 * time.Second, KeepSubscribed: 100 * time.Millisecond})

	a := mustAcquire(t, c, "cancel")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		err error
		at  time.Time
	}
	got := make(chan result, 1)
	go func() {
		_, err := waiter.Acquire(ctx, "cancel")
		got <- result{err, time.Now()}
	}()
	itest.Eventually(t, 10*time.Second, func() (bool, string) {
		return subscribers(t, holderRedis, channel) == 1, "waiter not subscribed"
	})
	cancelled := time.Now()
	cancel()
	select {
	case r := <-got:
		if !errors.Is(r.err, lock.ErrTimeout) || !errors.Is(r.err, context.Canceled) {
			t.Fatalf("cancelled Acquire = %v, want ErrTimeout and context.Canceled", r.err)
		}
		if took := r.at.Sub(cancelled); took > time.Second {
			t.Errorf("Acquire returned %s after its ctx was cancelled", took)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Acquire still waiting 5 s after its ctx was cancelled")
	}
	// The room closes its Pub/Sub connection KeepSubscribed after the wait; the server notices
	// shortly.
	itest.Eventually(t, 5*time.Second, func() (bool, string) {
		active := waiterRedis.PoolStats().PubSubStats.Active
		return active == 0, strconv.FormatUint(uint64(active), 10) + " Pub/Sub connections open after the wait returned"
	})
	itest.Eventually(t, 5*time.Second, func() (bool, string) {
		n := subscribers(t, holderRedis, channel)
		return n == 0, "PUBSUB NUMSUB " + channel + " = " + strconv.FormatInt(n, 10)
	})
	mustRelease(t, a)
}

// Release stops the renewal and waits for an extension in flight: no goroutine is left once
// Release returns. Not parallel: goleak looks at every goroutine of the process.
func TestReleaseStopsRenewal(t *testing.T) {
	const leases = 5
	const ttl = 600 * time.Millisecond
	var sent, done atomic.Int64
	inFlight := make(chan struct{}, 2*leases)
	slow := hookFunc(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if args := cmd.Args(); len(args) > 1 && args[1] == redislock.RenewScriptHash {
			sent.Add(1)
			defer done.Add(1)
			inFlight <- struct{}{}
			time.Sleep(100 * time.Millisecond)
		}
		return next(ctx, cmd)
	})
	c := newClient(t, itest.Redis(t, slow), redislock.Options{TTL: ttl})
	others := goleak.IgnoreCurrent()
	var held []*redislock.Lease
	for i := range leases {
		held = append(held, mustAcquire(t, c, "renewal-"+strconv.Itoa(i)))
	}
	for range leases { // every lease has an extension in flight
		<-inFlight
	}
	for _, l := range held {
		mustRelease(t, l)
	}
	if s, d := sent.Load(), done.Load(); s != d {
		t.Fatalf("Release returned with %d of %d extensions still in flight", s-d, s)
	}
	// What is left of the timer callbacks is their return (a goroutine may still be between
	// Done and its exit the instant Release returns): goleak.Find retries for a moment.
	if err := goleak.Find(others); err != nil {
		t.Fatalf("goroutines left after Release: %v", err)
	}
	// A renewal timer left armed is no goroutine until it fires: wait three renewal periods. A
	// slow machine can only make this miss a late extension, never fail a correct Release.
	before := sent.Load()
	time.Sleep(ttl)
	if after := sent.Load(); after != before {
		t.Fatalf("%d extensions sent after Release", after-before)
	}
}

// A renewal that hangs (go-redis bounds calls by its ReadTimeout unless the client honours ctx)
// does not delay Lost past the end of the lease, and Release still waits for it. Not parallel,
// for goleak.
func TestLostWhileRenewalHangs(t *testing.T) {
	const ttl = 150 * time.Millisecond
	const hang = 600 * time.Millisecond
	hung := make(chan struct{}, 1)
	var returned atomic.Bool
	slow := hookFunc(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if args := cmd.Args(); len(args) > 1 && args[1] == redislock.RenewScriptHash {
			hung <- struct{}{}
			defer returned.Store(true) // once the call is over, next included
			time.Sleep(hang)
		}
		return next(ctx, cmd)
	})
	c := newClient(t, itest.Redis(t, slow), redislock.Options{TTL: ttl})
	others := goleak.IgnoreCurrent()
	a := mustAcquire(t, c, "hung")
	start := time.Now()
	<-hung
	select {
	case <-a.Lost():
		if took := time.Since(start); took >= hang {
			t.Errorf("Lost() closed %s after the grant, with the extension hung for %s; the lease was %s", took, hang, ttl)
		}
	case <-time.After(hang):
		t.Fatal("Lost() waited for the hung renewal")
	}
	if err := a.Release(t.Context()); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Release after the lease ran out = %v, want ErrNotHeld", err)
	}
	if !returned.Load() {
		t.Fatal("Release returned while the hung extension was still in flight")
	}
	if err := goleak.Find(others); err != nil {
		t.Fatalf("goroutines left after Release: %v", err)
	}
}

// A turn that is woken and then gives up hands the wake-up on: the next waiter tries at once
// instead of sleeping until its re-check.
func TestGivingUpPassesTheWakeUp(t *testing.T) {
	t.Parallel()
	opts := redislock.Options{TTL: 10 * time.Second, Recheck: 10 * time.Second}
	rdb := itest.Redis(t)
	holder := newClient(t, rdb, opts)
	_, _, channel := redislock.Keys(holder, "give-up")
	opts.Prefix = mustPrefix(t, holder)
	var armed atomic.Bool
	var tries atomic.Int64
	// Armed, the next acquire attempt hangs until its caller's ctx ends, as a call to a slow
	// Redis would with a client that honours ctx.
	stall := hookFunc(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if isOurAcquire(cmd) {
			tries.Add(1)
			if armed.CompareAndSwap(true, false) {
				<-ctx.Done()
				cmd.SetErr(ctx.Err())
				return ctx.Err()
			}
		}
		return next(ctx, cmd)
	})
	waiter := newClient(t, itest.Redis(t, stall), opts)

	a := mustAcquire(t, holder, "give-up")
	firstCtx, cancelFirst := context.WithCancel(context.Background())
	defer cancelFirst()
	first := make(chan error, 1)
	go func() {
		_, err := waiter.Acquire(firstCtx, "give-up")
		first <- err
	}()
	itest.Eventually(t, 5*time.Second, func() (bool, string) {
		return subscribers(t, rdb, channel) == 1 && tries.Load() == 2, "first waiter not asleep yet"
	})
	second := make(chan error, 1)
	go acquireRelease(t.Context(), waiter, "give-up", second)
	itest.Eventually(t, 5*time.Second, func() (bool, string) {
		return tries.Load() == 3, "second waiter has not tried yet"
	})
	armed.Store(true)
	mustRelease(t, a) // wakes the first waiter, whose try then hangs
	itest.Eventually(t, 5*time.Second, func() (bool, string) {
		return !armed.Load(), "first waiter not woken"
	})
	cancelFirst()
	if err := <-first; !errors.Is(err, lock.ErrTimeout) {
		t.Fatalf("first waiter = %v, want ErrTimeout", err)
	}
	select {
	case err := <-second:
		if err != nil {
			t.Fatalf("second waiter: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("second waiter still waiting: the wake-up its predecessor took was lost")
	}
}

// The waiting calls of one Client share one subscription and take turns; a cancelled turn
// hands on, and every waiter still gets the lock by notification, not by re-checking.
func TestWaitersTakeTurns(t *testing.T) {
	t.Parallel()
	itest.SingleRedis(t) // PoolStats counts Pub/Sub connections of one server's client
	opts := redislock.Options{TTL: 10 * time.Second, Recheck: 10 * time.Second, KeepSubscribed: 100 * time.Millisecond}
	rdb := itest.Redis(t)
	holder := newClient(t, rdb, opts)
	_, _, channel := redislock.Keys(holder, "turns")
	opts.Prefix = mustPrefix(t, holder)
	hook := &counter{isAcquire: isOurAcquire}
	waiterRedis := itest.Redis(t, hook)
	waiter := newClient(t, waiterRedis, opts)

	a := mustAcquire(t, holder, "turns")
	const waiters = 5
	ctxs := make([]context.Context, waiters)
	cancels := make([]context.CancelFunc, waiters)
	errs := make(chan error, waiters)
	for i := range waiters {
		ctxs[i], cancels[i] = context.WithTimeout(t.Context(), time.Minute)
		defer cancels[i]()
		go acquireRelease(ctxs[i], waiter, "turns", errs)
		if i == 0 { // the first waiter holds the turn and subscribes
			itest.Eventually(t, 10*time.Second, func() (bool, string) {
				return subscribers(t, rdb, channel) == 1, "first waiter not subscribed"
			})
		}
	}
	// Each tried once; the first also once more after subscribing. Now all wait.
	itest.Eventually(t, 10*time.Second, func() (bool, string) {
		return hook.acquires.Load() == waiters+1, "waiters have not all tried yet"
	})
	if n := subscribers(t, rdb, channel); n != 1 {
		t.Fatalf("%d subscriptions for %d waiting calls of one Client, want 1", n, waiters)
	}
	cancels[0]() // the turn moves on
	if err := <-errs; !errors.Is(err, lock.ErrTimeout) {
		t.Fatalf("cancelled waiter = %v, want ErrTimeout", err)
	}
	released := time.Now()
	mustRelease(t, a)
	for range waiters - 1 {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatalf("waiter: %v", err)
			}
		case <-time.After(8 * time.Second):
			t.Fatalf("waiters still waiting %s after the release: notifications did not pass on", time.Since(released))
		}
	}
	if n := waiterRedis.PoolStats().PubSubStats.Created; n != 1 {
		t.Errorf("%d Pub/Sub connections for %d waiting calls of one Client, want 1", n, waiters)
	}
	itest.Eventually(t, 5*time.Second, func() (bool, string) {
		return subscribers(t, rdb, channel) == 0, "the subscription outlived the waits"
	})
}

// Mutual exclusion and token order also hold between Clients (processes), not only between the
// goroutines of one.
func TestMutualExclusionAcrossClients(t *testing.T) {
	t.Parallel()
	first := newClient(t, itest.Redis(t), redislock.Options{TTL: time.Second})
	clients := []*redislock.Client{first}
	for range 3 {
		clients = append(clients, newClient(t, itest.Redis(t), redislock.Options{TTL: time.Second, Prefix: mustPrefix(t, first)}))
	}
	var next atomic.Int64
	var last atomic.Uint64
	got := locktest.Increments(t, func(critical func()) error {
		c := clients[next.Add(1)%int64(len(clients))]
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a lock that never grants fails, not hangs
		defer cancel()
		l, err := c.Acquire(ctx, "across")
		if err != nil {
			return err
		}
		if prev := last.Swap(l.Token()); l.Token() <= prev {
			t.Errorf("token %d granted after %d", l.Token(), prev)
		}
		critical()
		return l.Release(ctx)
	})
	if want := int64(locktest.Workers * locktest.Rounds); got != want {
		t.Fatalf("counter = %d after %d increments under the lock", got, want)
	}
}

// Waits for one name that follow each other (one batch per replica: each replica's waiter leaves
// before the next one comes) share one subscription, kept between them, and still see releases:
// the notifications queued while nobody waited are dropped, and the next wait tries first.
func TestBackToBackWaitsShareASubscription(t *testing.T) {
	t.Parallel()
	itest.SingleRedis(t) // PoolStats counts Pub/Sub connections of one server's client
	holder := newClient(t, itest.Redis(t), redislock.Options{Recheck: 10 * time.Second})
	hook := &counter{}
	waiterRedis := itest.Redis(t, hook)
	waiter := newClient(t, waiterRedis, redislock.Options{Prefix: mustPrefix(t, holder), Recheck: 10 * time.Second})
	for round := range 3 {
		a := mustAcquire(t, holder, "back-to-back")
		got := make(chan error, 1)
		go acquireRelease(t.Context(), waiter, "back-to-back", got)
		itest.Eventually(t, 10*time.Second, func() (bool, string) {
			return waiterRedis.PoolStats().PubSubStats.Active == 1, "the waiter is not subscribed"
		})
		time.Sleep(20 * time.Millisecond) // the waiter is waiting (its re-check is 10 s away)
		released := time.Now()
		mustRelease(t, a)
		select {
		case err := <-got:
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: the waiter missed the release (waited %s)", round, time.Since(released))
		}
	}
	if n := waiterRedis.PoolStats().PubSubStats.Created; n != 1 {
		t.Errorf("%d Pub/Sub connections for 3 waits one after another, want 1", n)
	}
}

// TestAWaitEndingInARetryIsABusyLock: a waiter's retry that the wait's end cuts, sent with less
// than a fraction of a second of the wait left, is the wait for a busy lock running out
// (ErrTimeout: a buyer's 429), not Redis failing to answer (ErrUnavailable: a 503) — make bench's
// redis stampede answered 503 for those. A first try that the wait's end cuts, sent with the
// whole wait ahead of it, is still Redis not answering.
func TestAWaitEndingInARetryIsABusyLock(t *testing.T) {
	t.Parallel()
	const wait = 400 * time.Millisecond
	var stall atomic.Int64 // how long each acquire call of the slow client is held back
	slow := hookFunc(func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
		if isOurAcquire(cmd) {
			time.Sleep(time.Duration(stall.Load()))
		}
		return next(ctx, cmd)
	})
	c := newClient(t, itest.Redis(t, slow), redislock.Options{TTL: 5 * time.Second, Recheck: 30 * time.Millisecond})
	holder := newClient(t, itest.Redis(t), redislock.Options{TTL: 5 * time.Second, Prefix: mustPrefix(t, c)})
	held := mustAcquire(t, holder, "held")
	defer mustRelease(t, held)

	// Retries every 30 ms, each held back 50 ms: the one in flight when the wait ends was sent
	// at most 80 ms before it.
	stall.Store(int64(50 * time.Millisecond))
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	if l, err := c.Acquire(ctx, "held"); l != nil || !errors.Is(err, lock.ErrTimeout) || errors.Is(err, lock.ErrUnavailable) {
		t.Fatalf("a wait for a held lock ending in a retry: lease %v, err %v; want ErrTimeout (not ErrUnavailable)", l, err)
	}

	// The first try held back past the whole wait: Redis did not answer.
	stall.Store(int64(wait + 100*time.Millisecond))
	ctx, cancel = context.WithTimeout(t.Context(), wait)
	defer cancel()
	if l, err := c.Acquire(ctx, "free"); l != nil || !errors.Is(err, lock.ErrUnavailable) || errors.Is(err, lock.ErrTimeout) {
		t.Fatalf("a first try unanswered for the whole wait: lease %v, err %v; want ErrUnavailable (not ErrTimeout)", l, err)
	}
}
