package livestats

import (
	"context"
	"errors"
	"maps"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/itest"
)

// commands counts the commands sent through a client, by name, and fails a pipeline on demand.
type commands struct {
	mu   sync.Mutex
	n    map[string]int
	fail string // the next pipeline holding a command of this name fails
}

var errInjected = errors.New("injected failure")

func (c *commands) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *commands) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.count([]redis.Cmder{cmd})
		return next(ctx, cmd)
	}
}

func (c *commands) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if c.count(cmds) {
			for _, cmd := range cmds {
				cmd.SetErr(errInjected)
			}
			return errInjected
		}
		return next(ctx, cmds)
	}
}

// count counts cmds and reports whether they must fail.
func (c *commands) count(cmds []redis.Cmder) (fail bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	for _, cmd := range cmds {
		name := strings.ToLower(cmd.Name())
		if name == "hello" || name == "client" {
			continue // a new connection's handshake
		}
		c.n[name]++
		if name == c.fail {
			fail = true
		}
	}
	if fail {
		c.fail = ""
	}
	return fail
}

// take returns the counts since the last take.
func (c *commands) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = nil
	if n == nil {
		n = map[string]int{}
	}
	return n
}

func (c *commands) failNext(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fail = name
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// ratesEnv is a Recorder under test reading what another one, a replica, writes.
type ratesEnv struct {
	r    *Recorder // reads, on a client whose commands are counted
	w    *Recorder // writes, and reads in full what RatesOf must answer, on a client of its own
	clk  *clock
	cmds *commands
}

// base is a whole second: the tests place their calls in it by hand.
const base = 1_800_000_000

func newRatesEnv(tb testing.TB, o Options) *ratesEnv {
	tb.Helper()
	e := &ratesEnv{clk: &clock{now: time.Unix(base, 0)}, cmds: &commands{}}
	o.Namespace = "test-" + itest.Suffix(8)
	o.Now = e.clk.Now
	var err error
	if e.r, err = NewRecorder(quietLog(), itest.Redis(tb, e.cmds), o); err != nil {
		tb.Fatal(err)
	}
	if e.w, err = NewRecorder(quietLog(), itest.Redis(tb), o); err != nil {
		tb.Fatal(err)
	}
	e.cmds.take()
	return e
}

// flush writes t as a replica's flusher does.
func (e *ratesEnv) flush(tb testing.TB, t tally) {
	tb.Helper()
	if len(t) == 0 {
		return
	}
	if err := e.w.write(context.Background(), t); err != nil {
		tb.Fatal(err)
	}
}

// full reads ids in full, as RatesOf did before it kept windows: what it must answer.
func (e *ratesEnv) full(tb testing.TB, ids []int64) map[int64]Rates {
	tb.Helper()
	out := map[int64]Rates{}
	for _, id := range ids {
		rs, err := e.w.Rates(context.Background(), id)
		if err != nil {
			tb.Fatal(err)
		}
		out[id] = rs
	}
	return out
}

func (e *ratesEnv) ratesOf(tb testing.TB, ids ...int64) map[int64]Rates {
	tb.Helper()
	rs, err := e.r.RatesOf(context.Background(), ids)
	if err != nil {
		tb.Fatal(err)
	}
	return rs
}

// TestRatesOfMatchesAFullRead runs random traffic on a few products over minutes of (fake) time,
// flushed on time, and compares each call of RatesOf with a full read of the same products: a
// second dropped, counted twice or put in the wrong place by the windows shows. The steps between
// calls vary (the same second, one, several, a gap of more than History, the clock going back),
// one product is busy and never asked for, one asked for now and then (and forgotten in between).
func TestRatesOfMatchesAFullRead(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cached int
	}{
		{"every product cached", 0},
		{"more products than windows", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const history = 10
			e := newRatesEnv(t, Options{History: history, CachedProducts: tc.cached})
			e.clk.add(500 * time.Millisecond)
			seed := uint64(time.Now().UnixNano())
			t.Logf("seed %d", seed)
			rng := rand.New(rand.NewPCG(seed, 0))
			busy := map[int64]float64{1: 1, 2: 0.5, 3: 0.3, 4: 0.1, 5: 0.05, 6: 0, 7: 0.5, 8: 0.3}
			steps := []time.Duration{0, 150 * time.Millisecond, 400 * time.Millisecond, time.Second, time.Second, time.Second, 1600 * time.Millisecond, 2300 * time.Millisecond}
			const calls = 400
			incremental := 0
			for i := range calls {
				switch x := rng.IntN(100); {
				case x < 2:
					e.clk.add(time.Duration(history+rng.IntN(20)) * time.Second) // every window is dropped
				case x < 3:
					e.clk.add(-3 * time.Second)
				default:
					e.clk.add(steps[rng.IntN(len(steps))])
				}
				// Events of the running second and, in the flush period after a second, of
				// the one before: on time, both.
				now := e.clk.Now()
				tl := tally{}
				for id, p := range busy {
					if rng.Float64() >= p {
						continue
					}
					secs := []int64{now.Unix()}
					if now.Sub(now.Truncate(time.Second)) < e.r.every {
						secs = append(secs, now.Unix()-1)
					}
					for _, s := range secs {
						n := int64(1 + rng.IntN(5))
						tl[bucket{id, s}] = bucketCounts{requests: n, accepted: rng.Int64N(n + 1)}
					}
				}
				e.flush(t, tl)

				ids := []int64{1, 2, 3, 4, 5, 6}
				if rng.IntN(3) == 0 {
					ids = append(ids, 8)
				}
				if rng.IntN(10) == 0 {
					ids = append(ids, 2)
				}
				got := e.ratesOf(t, ids...)
				if e.cmds.take()["smembers"] > 0 {
					incremental++
				}
				if diff := cmp.Diff(e.full(t, ids), got); diff != "" {
					t.Fatalf("call %d at %s: RatesOf against a full read (-want +got):\n%s", i, now.Format(time.StampMilli), diff)
				}
			}
			if incremental < calls*3/4 {
				t.Errorf("%d of %d calls read the active sets: the windows were not used", incremental, calls)
			}
		})
	}
}

// TestRatesOfCostsWhatHadPurchases counts the commands of each call: an idle product costs none
// after its first read, one with purchases one MGET while its second is read or re-read, one
// that nobody asks for none.
func TestRatesOfCostsWhatHadPurchases(t *testing.T) {
	e := newRatesEnv(t, Options{})
	ids := make([]int64, 50)
	for i := range ids {
		ids[i] = int64(i + 1)
	}
	// Calls at .5 s: the last complete second is the one before the previous one.
	e.clk.add(500 * time.Millisecond)
	for _, step := range []struct {
		name    string
		advance time.Duration
		traffic []int64 // products with purchases in the running second
		want    map[string]int
	}{
		{"the first call reads each product in full", 0, nil, map[string]int{"mget": 50}},
		{"an idle second costs its set and those re-read", time.Second, nil, map[string]int{"smembers": 3}},
		{"the same second again", 100 * time.Millisecond, []int64{7, 1000}, map[string]int{"smembers": 2}},
		{"purchases in a second not complete yet", 500 * time.Millisecond, nil, map[string]int{"smembers": 2}},
		{"one product with purchases, one not asked for", 500 * time.Millisecond, nil, map[string]int{"smembers": 3, "mget": 1}},
		{"its second re-read", time.Second, nil, map[string]int{"smembers": 3, "mget": 1}},
		{"its second re-read again", time.Second, nil, map[string]int{"smembers": 3, "mget": 1}},
		{"idle again", time.Second, nil, map[string]int{"smembers": 3}},
		{"two seconds later", 2 * time.Second, nil, map[string]int{"smembers": 4}},
	} {
		e.clk.add(step.advance)
		tl := tally{}
		for _, id := range step.traffic {
			tl[bucket{id, e.clk.Now().Unix()}] = bucketCounts{requests: 3, accepted: 1}
		}
		e.flush(t, tl)
		got := e.ratesOf(t, ids...)
		if diff := cmp.Diff(step.want, e.cmds.take()); diff != "" {
			t.Errorf("%s: commands (-want +got):\n%s", step.name, diff)
		}
		if diff := cmp.Diff(e.full(t, ids), got); diff != "" {
			t.Errorf("%s: RatesOf against a full read (-want +got):\n%s", step.name, diff)
		}
	}
}

// TestRatesOfCountsALateFlush: a flush that lands less than rereadSeconds after its second is
// complete is counted from the next call on; a later one is not, by the windows (a full read
// still counts it). The calls come once a second, at .8 s.
func TestRatesOfCountsALateFlush(t *testing.T) {
	const s = base + 5
	complete := time.Unix(s+1, 0).Add(250*time.Millisecond + 50*time.Millisecond)
	for _, tc := range []struct {
		name string
		late time.Duration // when the late part of the second's events lands, after it is complete
		want int64         // what the calls after it lands count
	}{
		{"right after the first call that reads the second", 600 * time.Millisecond, 5},
		{"a second and a half late", 1500 * time.Millisecond, 5},
		{"just within the re-read", 1900 * time.Millisecond, 5},
		{"after the last re-read", 2600 * time.Millisecond, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newRatesEnv(t, Options{History: 10})
			lands := complete.Add(tc.late)
			landed := false
			for k := range 13 {
				e.clk.set(time.Unix(base, 800_000_000).Add(time.Duration(k) * time.Second))
				if e.clk.Now().Unix() == s {
					e.flush(t, tally{{1, s}: {requests: 2}}) // on time
				}
				if !landed && !e.clk.Now().Before(lands) {
					e.flush(t, tally{{1, s}: {requests: 3}})
					landed = true
				}
				got := e.ratesOf(t, 1)[1]
				if !landed {
					continue
				}
				first := got.Start.Unix()
				if n := got.Requests[s-first]; n != tc.want {
					t.Errorf("the call at %s counts %d requests in the late second, want %d", e.clk.Now().Format(time.StampMilli), n, tc.want)
				}
			}
			if !landed {
				t.Fatal("the late flush never landed")
			}
			full := e.full(t, []int64{1})[1]
			if n := full.Requests[s-full.Start.Unix()]; n != 5 {
				t.Errorf("a full read counts %d requests in the late second, want 5", n)
			}
		})
	}
}

// TestRatesOfReadsInFullAfterAnError: a call that fails half-way (its sets read, not its
// counters; or not even its sets) leaves no window behind it: the next call reads every product
// in full, and counts what happened meanwhile.
func TestRatesOfReadsInFullAfterAnError(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fails string // the command whose round trip fails
	}{
		{"the active sets", "smembers"},
		{"the counters of the active products", "mget"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newRatesEnv(t, Options{History: 10})
			ids := []int64{1, 2, 3, 4, 5}
			e.clk.add(500 * time.Millisecond)
			e.ratesOf(t, ids...)
			e.flush(t, tally{{2, e.clk.Now().Unix()}: {requests: 4, accepted: 1}})
			e.clk.add(2 * time.Second)
			e.cmds.take()

			e.cmds.failNext(tc.fails)
			if _, err := e.r.RatesOf(context.Background(), ids); !errors.Is(err, errInjected) {
				t.Fatalf("RatesOf with %s failing: %v, want the injected failure", tc.fails, err)
			}
			e.flush(t, tally{{2, e.clk.Now().Unix()}: {requests: 1}, {3, e.clk.Now().Unix()}: {requests: 2, accepted: 2}})
			e.clk.add(2 * time.Second)
			e.cmds.take()

			got := e.ratesOf(t, ids...)
			if diff := cmp.Diff(map[string]int{"mget": len(ids)}, e.cmds.take()); diff != "" {
				t.Errorf("commands of the call after the failure (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(e.full(t, ids), got); diff != "" {
				t.Errorf("RatesOf after the failure against a full read (-want +got):\n%s", diff)
			}
			e.clk.add(time.Second)
			e.ratesOf(t, ids...)
			if n := e.cmds.take(); n["smembers"] == 0 || n["mget"] >= len(ids) {
				t.Errorf("commands of the next call: %v, want the windows used again", n)
			}
		})
	}
}

// TestRatesOfBoundsItsWindows: no more than CachedProducts windows, and none of a product not
// asked for in History seconds; the answers stay those of a full read.
func TestRatesOfBoundsItsWindows(t *testing.T) {
	e := newRatesEnv(t, Options{History: 5, CachedProducts: 3})
	e.clk.add(500 * time.Millisecond)
	ids := []int64{1, 2, 3, 4, 5}
	for range 3 {
		e.flush(t, tally{{1, e.clk.Now().Unix()}: {requests: 1}, {5, e.clk.Now().Unix()}: {requests: 2}})
		if diff := cmp.Diff(e.full(t, ids), e.ratesOf(t, ids...)); diff != "" {
			t.Errorf("RatesOf against a full read (-want +got):\n%s", diff)
		}
		e.clk.add(time.Second)
	}
	if got := cached(e.r); len(got) != 3 {
		t.Errorf("windows of %v, want 3 of them", got)
	}
	for range 5 {
		e.ratesOf(t, 1)
		e.clk.add(time.Second)
	}
	if diff := cmp.Diff([]int64{1}, cached(e.r)); diff != "" {
		t.Errorf("windows after 5 s of asking for 1 only (-want +got):\n%s", diff)
	}
}

func cached(r *Recorder) []int64 {
	r.cacheLock <- struct{}{}
	defer func() { <-r.cacheLock }()
	ids := make([]int64, 0, len(r.cache.byID))
	for id := range maps.Keys(r.cache.byID) {
		ids = append(ids, id)
	}
	return ids
}

// TestRatesOfGivesUpWaiting: a call queued behind a slow one leaves when its context ends.
func TestRatesOfGivesUpWaiting(t *testing.T) {
	e := newRatesEnv(t, Options{})
	e.r.cacheLock <- struct{}{} // a call that hangs on Redis
	defer func() { <-e.r.cacheLock }()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := e.r.RatesOf(ctx, []int64{1}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("RatesOf behind a held lock: %v, want the deadline", err)
	}
}

// BenchmarkRatesOfIdle is a board's call a second with 1,000 open sales and no purchase: with
// the windows ("incremental") and as each call read every product before them ("full").
func BenchmarkRatesOfIdle(b *testing.B) {
	for _, bc := range []struct {
		name string
		full bool
	}{{"incremental", false}, {"full", true}} {
		b.Run(bc.name, func(b *testing.B) {
			e := newRatesEnv(b, Options{})
			ids := make([]int64, 1000)
			for i := range ids {
				ids[i] = int64(i + 1)
			}
			e.ratesOf(b, ids...)
			b.ReportAllocs()
			for b.Loop() {
				e.clk.add(time.Second)
				if bc.full {
					e.r.cache.reset()
				}
				if _, err := e.r.RatesOf(context.Background(), ids); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
