package redisroom

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/waitroom"
)

// fixture is one test's room on the test Redis: a namespace of its own, so that tests run in
// parallel, and its keys deleted when the test ends (never a FLUSHDB: others share the Redis).
type fixture struct {
	room *Room
	rdb  redis.UniversalClient
	ns   string
	sale string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	rdb := itest.Redis(t)
	f := &fixture{rdb: rdb, ns: "test-" + itest.Suffix(8), sale: "s1"}
	f.room = f.replica(t)
	t.Cleanup(func() { _ = f.rdb.Del(context.Background(), f.room.Keys(f.sale).All()...).Err() })
	return f
}

// replica returns another Room on the same namespace with a client of its own: another replica.
func (f *fixture) replica(t *testing.T) *Room {
	t.Helper()
	rdb := f.rdb
	if f.room != nil {
		rdb = itest.Redis(t)
	}
	r, err := New(rdb, f.ns)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// now is Redis's clock: the room's.
func (f *fixture) now(t testing.TB) time.Time {
	t.Helper()
	tm, err := f.rdb.Time(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// until waits until Redis's clock shows at.
func (f *fixture) until(t testing.TB, at time.Time) {
	t.Helper()
	for {
		d := at.Sub(f.now(t))
		if d <= 0 {
			return
		}
		time.Sleep(min(d, 50*time.Millisecond))
	}
}

// settings are open since a second, admit fast and hold many sessions: a test changes what it
// tests.
func (f *fixture) settings(t testing.TB) waitroom.Settings {
	return waitroom.Settings{Mode: waitroom.WaitingRoom, AdmitRate: 1000, MaxActive: 10_000, Session: time.Minute,
		OpensAt: f.now(t).Add(-time.Second), AbandonAfter: time.Minute}
}

func (f *fixture) configure(t testing.TB, s waitroom.Settings) {
	t.Helper()
	if err := f.room.Configure(t.Context(), f.sale, s); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) join(t testing.TB, buyer string) waitroom.Status {
	t.Helper()
	st, err := f.room.Join(t.Context(), f.sale, buyer)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func (f *fixture) status(t testing.TB, buyer string) waitroom.Status {
	t.Helper()
	st, err := f.room.Status(t.Context(), f.sale, buyer)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func (f *fixture) admit(t testing.TB) Admission {
	t.Helper()
	a, err := f.room.Admit(t.Context(), f.sale)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// buyers returns n buyer ids, b1 to bn.
func buyers(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "b" + strconv.Itoa(i+1)
	}
	return out
}

// parallel runs f(i) for i in [0, n) on n goroutines, released at once, and fails the test with
// the first error.
func parallel(t *testing.T, n int, f func(i int) error) {
	t.Helper()
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		errs  = make(chan error, n)
	)
	for i := range n {
		wg.Go(func() {
			<-start
			errs <- f(i)
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}
