package ratelimit

import (
	"context"
	mathrand "math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	"github.com/seckill-go/seckill-go/internal/itest"
)

// TestLocalMatchesRate: the local buckets follow golang.org/x/time/rate request by request,
// the clock stepping back included.
func TestLocalMatchesRate(t *testing.T) {
	rnd := mathrand.New(mathrand.NewPCG(1, 2))
	for _, lim := range []Limit{{5, 10}, {2, 2}, {0.5, 1}, {1000, 3}, {3, 0}} {
		l := NewLocal(lim)
		ref := map[string]*rate.Limiter{}
		now := time.Unix(1_800_000_000, 0)
		for i := range 20000 {
			switch r := rnd.IntN(100); {
			case r < 2:
				now = now.Add(-time.Duration(rnd.IntN(1000)) * time.Millisecond)
			case r < 60:
				now = now.Add(time.Duration(rnd.IntN(400)) * time.Millisecond)
			}
			key := "k" + strconv.Itoa(rnd.IntN(5))
			if ref[key] == nil {
				ref[key] = rate.NewLimiter(rate.Limit(lim.PerSecond), max(lim.Burst, 1))
			}
			got, _ := l.Allow(key, now)
			if want := ref[key].AllowN(now, 1); got != want {
				t.Fatalf("%v, request %d of %s at %v: Allow = %v, rate.Limiter says %v", lim, i, key, now, got, want)
			}
		}
	}
}

func TestUnlimitedAllowsAll(t *testing.T) {
	s, err := NewShared(nil, Limit{}, Options{})
	if err != nil || s != nil {
		t.Fatalf("NewShared(unlimited) = %v, %v; want nil, nil", s, err)
	}
	if ok, _ := s.Allow(t.Context(), "k"); !ok {
		t.Fatal("a nil Shared refused")
	}
	if ok, _ := NewLocal(Limit{}).Allow("k", time.Now()); !ok {
		t.Fatal("a nil Local refused")
	}
}

// calls counts the script calls a go-redis client sends (pipelined or not; not the commands
// go-redis adds of its own, such as a connection's CLIENT SETINFO), and its pipelines.
type calls struct{ n, pipelines atomic.Int64 }

func isScript(cmd redis.Cmder) bool { return strings.HasPrefix(cmd.Name(), "eval") }

func (c *calls) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *calls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isScript(cmd) {
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (c *calls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if isScript(cmd) {
				c.n.Add(1)
			}
		}
		c.pipelines.Add(1)
		return next(ctx, cmds)
	}
}

// TestBatchesNewKeys: keys asked at once share pipelines, and each gets its own answer: half of
// them, spent before, are refused; the other half, new, are allowed.
func TestBatchesNewKeys(t *testing.T) {
	hook := &calls{}
	s, err := NewShared(itest.Redis(t, hook), Limit{PerSecond: 0.001, Burst: 1}, Options{Name: "test:" + itest.Suffix(8)})
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	// Spent from another replica (so that this one holds no refusal of its own for them).
	other, err := NewShared(itest.Redis(t), Limit{PerSecond: 0.001, Burst: 1}, Options{Name: s.opts.Name})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i += 2 {
		if ok, _ := other.Allow(t.Context(), strconv.Itoa(i)); !ok {
			t.Fatal("a new key refused")
		}
	}
	s.Allow(t.Context(), "warm-up") // the script is loaded
	before := hook.pipelines.Load()
	var wrong atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if ok, _ := s.Allow(t.Context(), strconv.Itoa(i)); ok != (i%2 == 1) {
				wrong.Add(1)
			}
		})
	}
	wg.Wait()
	p := hook.pipelines.Load() - before
	t.Logf("%d keys asked at once: %d pipelines", n, p)
	if wrong.Load() > 0 {
		t.Errorf("%d keys got another key's answer", wrong.Load())
	}
	if p >= n/2 {
		t.Errorf("%d pipelines for %d keys asked at once: not batched", p, n)
	}
}

// TestSharedCapsAKeyAcrossReplicas: three limiters (three replicas) on one Redis let one greedy
// key through at the limit overall, not three times it, while other keys go through.
func TestSharedCapsAKeyAcrossReplicas(t *testing.T) {
	const perSecond, burst = 20, 20
	name := "test:" + itest.Suffix(8)
	var replicas []*Shared
	for range 3 {
		s, err := NewShared(itest.Redis(t), Limit{perSecond, burst}, Options{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		replicas = append(replicas, s)
	}
	var allowed, others atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for i, s := range replicas {
		wg.Go(func() {
			for n := 0; time.Since(start) < 1500*time.Millisecond; n++ {
				if ok, _ := s.Allow(t.Context(), "greedy"); ok {
					allowed.Add(1)
				}
				if n%50 == 0 {
					if ok, _ := s.Allow(t.Context(), "buyer-"+strconv.Itoa(i)+"-"+strconv.Itoa(n)); ok {
						others.Add(1)
					}
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	most := burst + int64(perSecond*elapsed) + 1
	t.Logf("greedy key: %d allowed in %.2fs over 3 replicas (limit %d/s, burst %d: at most %d); other buyers %d",
		allowed.Load(), elapsed, perSecond, burst, most, others.Load())
	if got := allowed.Load(); got > most || got < burst {
		t.Errorf("greedy key allowed %d times, want between %d and %d", got, burst, most)
	}
	if others.Load() == 0 {
		t.Error("no other buyer got through while the greedy one was capped")
	}

	// The control: one local limiter per replica, the limit each had before, lets the greedy key
	// through about three times as often, which the bound above catches.
	var local int64
	locals := []*Local{NewLocal(Limit{perSecond, burst}), NewLocal(Limit{perSecond, burst}), NewLocal(Limit{perSecond, burst})}
	for now := start; now.Before(start.Add(1500 * time.Millisecond)); now = now.Add(time.Millisecond) {
		for _, l := range locals {
			if ok, _ := l.Allow("greedy", now); ok {
				local++
			}
		}
	}
	if local <= most {
		t.Errorf("control: per-replica limiters allowed %d, not more than %d: the check cannot catch a limit that is not shared", local, most)
	}
}

// TestLeasesSaveRoundTrips: a busy key costs one Redis call per lease, and a refused one none
// while its refusal stands.
func TestLeasesSaveRoundTrips(t *testing.T) {
	hook := &calls{}
	s, err := NewShared(itest.Redis(t, hook), Limit{PerSecond: 1000, Burst: 100}, Options{Name: "test:" + itest.Suffix(8), Lease: 25})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if ok, _ := s.Allow(t.Context(), "busy"); !ok {
			t.Fatalf("request %d of a key within its burst refused", i)
		}
	}
	if n := hook.n.Load(); n > 8 { // 4 leases, plus the script's load on first use
		t.Errorf("%d Redis calls for 100 requests with leases of 25", n)
	}

	tight, err := NewShared(itest.Redis(t, hook), Limit{PerSecond: 0.5, Burst: 1}, Options{Name: "test:" + itest.Suffix(8)})
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := tight.Allow(t.Context(), "k"); !ok {
		t.Fatal("first request refused")
	}
	ok, wait := tight.Allow(t.Context(), "k")
	if ok || wait <= 0 {
		t.Fatalf("second request: allowed %v, wait %s; want a refusal with a wait", ok, wait)
	}
	before := hook.n.Load()
	for range 50 {
		if ok, _ := tight.Allow(t.Context(), "k"); ok {
			t.Fatal("a refused key got through before its wait")
		}
	}
	if n := hook.n.Load() - before; n != 0 {
		t.Errorf("%d Redis calls while the refusal stood, want 0", n)
	}
}

// TestFallsBackToLocal: with Redis unreachable each replica limits on its own (the local
// limit), never "no limit", and a Redis call is not tried on every request.
func TestFallsBackToLocal(t *testing.T) {
	itest.Integration(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	hook := &calls{}
	rdb := redis.NewClient(&redis.Options{Addr: dead, MaxRetries: -1, DialTimeout: 50 * time.Millisecond})
	rdb.AddHook(hook)
	t.Cleanup(func() { rdb.Close() })
	s, err := NewShared(rdb, Limit{PerSecond: 1, Burst: 5}, Options{Name: "test:down"})
	if err != nil {
		t.Fatal(err)
	}
	allowed := 0
	start := time.Now()
	for range 100 {
		if ok, _ := s.Allow(t.Context(), "k"); ok {
			allowed++
		}
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("100 requests took %s with Redis down: the fallback must not wait on Redis each time", took)
	}
	if allowed < 5 || allowed > 6 {
		t.Errorf("%d of 100 allowed with Redis down, want the local burst of 5 (give or take the refill)", allowed)
	}
	if n := hook.n.Load(); n > 2 {
		t.Errorf("%d Redis calls with Redis down, want 1: the fallback holds for FallbackFor", n)
	}
}

// TestLocalForgetsIdleKeys: memory stays bounded by the keys seen in the last sweep interval.
func TestLocalForgetsIdleKeys(t *testing.T) {
	l := NewLocal(Limit{PerSecond: 5, Burst: 10})
	now := time.Unix(1_800_000_000, 0)
	for i := range 1000 {
		l.Allow("k"+strconv.Itoa(i), now)
	}
	if n := l.tracked(); n != 1000 {
		t.Fatalf("%d keys tracked, want 1000", n)
	}
	l.Allow("late", now.Add(2*sweepEvery))
	if n := l.tracked(); n != 1 {
		t.Fatalf("%d keys tracked after the sweep, want only the one seen since", n)
	}
}

// TestFirstLocal: with FirstLocal a key's first attempt on a replica costs no Redis call, its
// next ones ask Redis as usual; over three replicas a key gets its burst plus one attempt per
// replica, not more.
func TestFirstLocal(t *testing.T) {
	hook := &calls{}
	name := "test:" + itest.Suffix(8)
	var replicas []*Shared
	for range 3 {
		s, err := NewShared(itest.Redis(t, hook), Limit{PerSecond: 0.001, Burst: 2}, Options{Name: name, FirstLocal: true})
		if err != nil {
			t.Fatal(err)
		}
		replicas = append(replicas, s)
	}
	for i := range 100 {
		if ok, _ := replicas[0].Allow(t.Context(), "new-"+strconv.Itoa(i)); !ok {
			t.Fatal("a new key refused")
		}
	}
	if n := hook.n.Load(); n != 0 {
		t.Errorf("%d Redis calls for 100 first attempts, want 0", n)
	}
	allowed := 0
	for range 10 {
		for _, r := range replicas {
			if ok, _ := r.Allow(t.Context(), "greedy"); ok {
				allowed++
			}
		}
	}
	if allowed != 2+3 {
		t.Errorf("a key over three replicas was allowed %d times, want 5 (its burst of 2, and one first attempt on each replica)", allowed)
	}
	if hook.n.Load() == 0 {
		t.Error("no Redis call for a key's later attempts")
	}
}

// TestOneCallPerBusyKey: requests of one key that arrive together while it has no lease share
// the Redis call of the first (and its lease) instead of each asking Redis.
func TestOneCallPerBusyKey(t *testing.T) {
	hook := &calls{}
	s, err := NewShared(itest.Redis(t, hook), Limit{PerSecond: 1e6, Burst: 40}, Options{Name: "test:" + itest.Suffix(8)})
	if err != nil {
		t.Fatal(err)
	}
	s.Allow(t.Context(), "warm-up") // the script is loaded
	before := hook.n.Load()
	var refused atomic.Int64
	var wg sync.WaitGroup
	for range 200 {
		wg.Go(func() {
			if ok, _ := s.Allow(t.Context(), "busy"); !ok {
				refused.Add(1)
			}
		})
	}
	wg.Wait()
	n := hook.n.Load() - before
	t.Logf("200 requests of one key at once: %d Redis calls (leases of 10)", n)
	if refused.Load() > 0 {
		t.Errorf("%d requests refused under a limit of a million a second", refused.Load())
	}
	if n > 60 {
		t.Errorf("%d Redis calls for 200 requests of one key with leases of 10, want about 20", n)
	}
}
