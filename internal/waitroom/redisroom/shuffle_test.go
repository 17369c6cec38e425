package redisroom

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/waitroom"
)

// TestPreQueueShuffledOnce: a shuffling room's pre-queue waits without a place until the
// opening; then eight replicas race (joins of latecomers, polls of everyone, admissions) and
// every one of them sees the same draw: the pre-queue's tickets are a permutation of 1..P, not
// the order of joining, and the latecomers queue behind it in order.
func TestPreQueueShuffledOnce(t *testing.T) {
	t.Parallel()
	const pre, replicas = 100, 8
	f := newFixture(t)
	s := f.settings(t)
	s.Shuffle, s.OpensAt = true, f.now(t).Add(700*time.Millisecond)
	f.configure(t, s)
	bs := buyers(pre)
	parallel(t, pre, func(i int) error {
		st, err := f.room.Join(t.Context(), f.sale, bs[i])
		if err == nil && (st.State != waitroom.PreQueue || st.Ticket != 0) {
			err = fmt.Errorf("%s before the opening: %+v, want pre_queue without a ticket", bs[i], st)
		}
		return err
	})
	joined, err := f.rdb.LRange(t.Context(), f.room.Keys(f.sale).Pre, 0, -1).Result()
	if err != nil || len(joined) != pre {
		t.Fatalf("the pre-queue holds %d buyers (%v), want %d", len(joined), err, pre)
	}
	if f.now(t).After(s.OpensAt) {
		t.Fatal("the joins took longer than the time to the opening: the test proves nothing")
	}
	f.until(t, s.OpensAt)

	seen := raceAfterOpening(t, f, bs, replicas)

	if len(seen) != pre+replicas {
		t.Fatalf("%d buyers seen, want %d", len(seen), pre+replicas)
	}
	order := make([]string, pre+replicas) // buyers by ticket
	for b, tks := range seen {
		if len(tks) != 1 {
			t.Fatalf("%s: the replicas saw tickets %v: the pre-queue was placed more than once", b, tks)
		}
		for tk := range tks {
			if late := strings.HasPrefix(b, "late"); tk < 1 || tk > int64(len(order)) || late != (tk > pre) || order[tk-1] != "" {
				t.Fatalf("%s: ticket %d: want the pre-queue in 1..%d, latecomers after, each ticket once", b, tk, pre)
			}
			order[tk-1] = b
		}
	}
	order = order[:pre] // every ticket is taken, once: a permutation
	if slices.Equal(order, joined) {
		t.Fatal("the pre-queue kept its order of joining: no shuffle")
	}
	if sd, err := f.rdb.HGet(t.Context(), f.room.Keys(f.sale).Meta, "seed").Result(); err != nil || sd == "" {
		t.Fatalf("the draw's seed is not kept: %q, %v", sd, err)
	}
	if n, _ := f.rdb.Exists(t.Context(), f.room.Keys(f.sale).Pre).Result(); n != 0 {
		t.Fatal("the pre-queue list outlived the opening")
	}
}

// TestPreQueueWithoutShuffleKeepsOrder: without the shuffle the opening changes nobody's place.
func TestPreQueueWithoutShuffleKeepsOrder(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.settings(t)
	s.OpensAt = f.now(t).Add(300 * time.Millisecond)
	f.configure(t, s)
	bs := buyers(5)
	for _, b := range bs {
		f.join(t, b)
	}
	f.until(t, s.OpensAt)
	late := f.join(t, "late")
	if late.Ticket != 6 || late.State != waitroom.Waiting {
		t.Fatalf("a join after the opening: %+v, want ticket 6, waiting", late)
	}
	for i, b := range bs {
		if st := f.status(t, b); st.Ticket != int64(i+1) || st.State != waitroom.Waiting {
			t.Fatalf("%s after the opening: %+v, want ticket %d, waiting", b, st, i+1)
		}
	}
}

// raceAfterOpening has replicas rooms race right after the opening: each joins a latecomer
// (late0, late1...), admits, and polls every buyer of bs, starting at its own place in the list.
// It returns the tickets each buyer was seen with.
func raceAfterOpening(t *testing.T, f *fixture, bs []string, replicas int) map[string]map[int64]bool {
	t.Helper()
	pre := len(bs)
	rooms := make([]*Room, replicas)
	for i := range rooms {
		rooms[i] = f.replica(t)
	}
	var mu sync.Mutex
	seen := map[string]map[int64]bool{} // buyer → the tickets the replicas saw
	note := func(b string, tk int64) {
		mu.Lock()
		defer mu.Unlock()
		if seen[b] == nil {
			seen[b] = map[int64]bool{}
		}
		seen[b][tk] = true
	}
	parallel(t, replicas, func(i int) error {
		r := rooms[i]
		st, err := r.Join(t.Context(), f.sale, fmt.Sprintf("late%d", i))
		if err != nil {
			return err
		}
		note(fmt.Sprintf("late%d", i), st.Ticket)
		if _, err := r.Admit(t.Context(), f.sale); err != nil {
			return err
		}
		for k := range pre {
			b := bs[(k+i*pre/replicas)%pre] // each replica starts elsewhere in the list
			st, err := r.Status(t.Context(), f.sale, b)
			if err != nil {
				return err
			}
			note(b, st.Ticket)
		}
		return nil
	})
	return seen
}
