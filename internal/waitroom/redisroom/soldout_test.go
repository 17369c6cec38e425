package redisroom

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/seckill-go/seckill-go/internal/waitroom"
)

// TestAbandonedSkipped: visitors silent for longer than the abandon timeout when their turn
// comes are skipped, without using the rate, and told so; one who joins again queues at the back.
func TestAbandonedSkipped(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.settings(t)
	s.AbandonAfter = waitroom.MinAbandon
	f.configure(t, s)
	for _, b := range buyers(5) {
		f.join(t, b)
	}
	// b1, b3 and b5 poll; b2 and b4 closed their tabs.
	end := f.now(t).Add(s.AbandonAfter + 300*time.Millisecond)
	for f.now(t).Before(end) {
		for _, b := range []string{"b1", "b3", "b5"} {
			f.status(t, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	a := f.admit(t)
	if diff := cmp.Diff([]string{"b1", "b3", "b5"}, a.Admitted); diff != "" || a.Skipped != 2 || a.Served != 5 {
		t.Fatalf("Admit: skipped %d, served %d, admitted (-want +got):\n%s", a.Skipped, a.Served, diff)
	}
	for range 2 { // a poll after the skip does not bring it back
		if st := f.status(t, "b2"); st.State != waitroom.Abandoned {
			t.Fatalf("b2: %v, want abandoned", st.State)
		}
	}
	if st := f.join(t, "b2"); st.Ticket != 6 || st.State != waitroom.Waiting {
		t.Fatalf("b2 joining again: %+v, want ticket 6, waiting", st)
	}
	if a := f.admit(t); len(a.Admitted) != 1 || a.Admitted[0] != "b2" {
		t.Fatalf("Admit after b2 joined again: %v, want [b2]", a.Admitted)
	}
}

// TestNobodyHeardNobodySkipped: when no one in line was heard from (Redis or every replica was
// down, nobody could poll), no one is taken for gone: silence is measured against the newest
// heartbeat, not the clock.
func TestNobodyHeardNobodySkipped(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.settings(t)
	s.AbandonAfter = waitroom.MinAbandon
	f.configure(t, s)
	for _, b := range buyers(3) {
		f.join(t, b)
	}
	f.until(t, f.now(t).Add(s.AbandonAfter+300*time.Millisecond))
	if a := f.admit(t); len(a.Admitted) != 3 || a.Skipped != 0 {
		t.Fatalf("Admit after a silence of everyone: admitted %v, skipped %d; want all 3, none", a.Admitted, a.Skipped)
	}
}

// TestSoldOutReachesEveryone: once the room is marked sold out, every visitor in line is told so
// at its next poll, on any replica; the admitted keep their sessions; nobody more is admitted.
func TestSoldOutReachesEveryone(t *testing.T) {
	t.Parallel()
	const n, maxActive = 200, 5
	f := newFixture(t)
	s := f.settings(t)
	s.MaxActive = maxActive
	f.configure(t, s)
	bs := buyers(n)
	parallel(t, 8, func(i int) error {
		for k := i; k < n; k += 8 {
			if _, err := f.room.Join(t.Context(), f.sale, bs[k]); err != nil {
				return err
			}
		}
		return nil
	})
	if a := f.admit(t); len(a.Admitted) != maxActive {
		t.Fatalf("admitted %d before the sell-out, want %d", len(a.Admitted), maxActive)
	}
	rooms := []*Room{f.room, f.replica(t), f.replica(t)}
	if err := rooms[1].SoldOut(t.Context(), f.sale); err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		states = map[waitroom.State]int{}
	)
	parallel(t, len(rooms), func(i int) error {
		for k := i; k < n; k += len(rooms) {
			st, err := rooms[i].Status(t.Context(), f.sale, bs[k])
			if err != nil {
				return err
			}
			if _, ok := st.Wait(s); ok && st.State == waitroom.SoldOut {
				return fmt.Errorf("%s: sold out, with a wait", bs[k])
			}
			mu.Lock()
			states[st.State]++
			mu.Unlock()
		}
		return nil
	})
	want := map[waitroom.State]int{waitroom.Admitted: maxActive, waitroom.SoldOut: n - maxActive}
	if diff := cmp.Diff(want, states); diff != "" {
		t.Fatalf("states after the sell-out (-want +got):\n%s", diff)
	}
	s.MaxActive = n // even with room for everyone
	f.configure(t, s)
	if a := f.admit(t); len(a.Admitted) != 0 {
		t.Fatalf("admitted %v after the sell-out", a.Admitted)
	}
}

// TestReturnedAdmitsNextInLine: after the sell-out, each returned unit admits the next visitor
// in line, and no one else; those it will admit are told they wait, the rest sold out.
func TestReturnedAdmitsNextInLine(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.configure(t, f.settings(t))
	bs := buyers(10)
	for _, b := range bs {
		f.join(t, b)
	}
	if err := f.room.SoldOut(t.Context(), f.sale); err != nil {
		t.Fatal(err)
	}
	if err := f.room.Returned(t.Context(), f.sale, 3); err != nil {
		t.Fatal(err)
	}
	f.expectStates(t, bs, map[string]waitroom.State{"b1": waitroom.Waiting, "b2": waitroom.Waiting, "b3": waitroom.Waiting}, waitroom.SoldOut)
	if a := f.admit(t); !cmp.Equal(a.Admitted, bs[:3]) {
		t.Fatalf("Admit after 3 returned: %v, want %v", a.Admitted, bs[:3])
	}
	if a := f.admit(t); len(a.Admitted) != 0 {
		t.Fatalf("Admit with no unit left: %v", a.Admitted)
	}
	f.expectStates(t, bs, map[string]waitroom.State{"b1": waitroom.Admitted, "b2": waitroom.Admitted, "b3": waitroom.Admitted}, waitroom.SoldOut)
	if err := f.room.Returned(t.Context(), f.sale, 1); err != nil {
		t.Fatal(err)
	}
	if a := f.admit(t); !cmp.Equal(a.Admitted, []string{"b4"}) {
		t.Fatalf("Admit after 1 more returned: %v, want [b4]", a.Admitted)
	}
	if err := f.room.Returned(t.Context(), f.sale, 0); err == nil {
		t.Fatal("Returned accepted 0 units")
	}
}

// TestReturnBeforeSoldOutIsKept: a return that overtakes the sold-out mark it follows (two
// replicas racing) still admits the next in line.
func TestReturnBeforeSoldOutIsKept(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.configure(t, f.settings(t))
	for _, b := range buyers(3) {
		f.join(t, b)
	}
	if err := f.room.Returned(t.Context(), f.sale, 1); err != nil {
		t.Fatal(err)
	}
	if err := f.room.SoldOut(t.Context(), f.sale); err != nil {
		t.Fatal(err)
	}
	if a := f.admit(t); !cmp.Equal(a.Admitted, []string{"b1"}) {
		t.Fatalf("Admit: %v, want [b1]", a.Admitted)
	}
}

// expectStates polls every buyer of bs and wants the state want names, or else otherwise.
func (f *fixture) expectStates(t *testing.T, bs []string, want map[string]waitroom.State, otherwise waitroom.State) {
	t.Helper()
	for _, b := range bs {
		w, ok := want[b]
		if !ok {
			w = otherwise
		}
		if st := f.status(t, b); st.State != w {
			t.Fatalf("%s: %v, want %v", b, st.State, w)
		}
	}
}

// TestClockNeverRunsBackwards: after a failover to a master whose clock is behind (played here by
// a room clock set ahead of Redis's), the room's time stands still rather than going back, so
// that no session lasts longer and no rate budget is counted twice.
func TestClockNeverRunsBackwards(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.configure(t, f.settings(t))
	ahead := f.now(t).Add(time.Hour).Truncate(time.Millisecond)
	if err := f.rdb.HSet(t.Context(), f.room.Keys(f.sale).Meta, "clock", ahead.UnixMilli()).Err(); err != nil {
		t.Fatal(err)
	}
	if st := f.join(t, "alice"); !st.Now.Equal(ahead) {
		t.Fatalf("the room's clock: %v, want it standing at %v", st.Now, ahead)
	}
	if a := f.admit(t); !a.At.Equal(ahead) {
		t.Fatalf("Admit's clock: %v, want it standing at %v", a.At, ahead)
	}
}
