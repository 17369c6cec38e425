package redisroom

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/seckill-go/seckill-go/internal/waitroom"
)

func TestKeysShareOneSlot(t *testing.T) {
	k := KeysFor("db", "42")
	for _, key := range k.All() {
		if !strings.HasPrefix(key, "waitroom:{db:42}:") {
			t.Errorf("%s: not under the hash tag {db:42}", key)
		}
	}
	if KeysFor("db", "4").Meta == KeysFor("db", "42").Meta || KeysFor("a", "1").Meta == KeysFor("b", "1").Meta {
		t.Fatal("two rooms share a key")
	}
	if _, err := New(nil, "ns"); err == nil {
		t.Error("New accepted no client")
	}
}

// TestNoRoom: a sale never configured has no room, and every call says so.
func TestNoRoom(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	if _, err := f.room.Join(ctx, f.sale, "alice"); !errors.Is(err, waitroom.ErrNoRoom) {
		t.Errorf("Join: %v", err)
	}
	if _, err := f.room.Status(ctx, f.sale, "alice"); !errors.Is(err, waitroom.ErrNoRoom) {
		t.Errorf("Status: %v", err)
	}
	if _, err := f.room.Admit(ctx, f.sale); !errors.Is(err, waitroom.ErrNoRoom) {
		t.Errorf("Admit: %v", err)
	}
	if err := f.room.SoldOut(ctx, f.sale); !errors.Is(err, waitroom.ErrNoRoom) {
		t.Errorf("SoldOut: %v", err)
	}
	if err := f.room.Returned(ctx, f.sale, 1); !errors.Is(err, waitroom.ErrNoRoom) {
		t.Errorf("Returned: %v", err)
	}
	if n, _ := f.rdb.Exists(ctx, f.room.Keys(f.sale).All()...).Result(); n != 0 {
		t.Errorf("calls on no room left %d keys", n)
	}
}

func TestConfigureRefuses(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.settings(t)
	for name, bad := range map[string]func(*waitroom.Settings){
		"open":    func(s *waitroom.Settings) { s.Mode = waitroom.Open },
		"no rate": func(s *waitroom.Settings) { s.AdmitRate = 0 },
	} {
		c := s
		bad(&c)
		if err := f.room.Configure(t.Context(), f.sale, c); !errors.Is(err, waitroom.ErrInvalidSettings) {
			t.Errorf("%s: Configure = %v, want ErrInvalidSettings", name, err)
		}
	}
	if err := f.room.Configure(t.Context(), "a{b}", s); err == nil {
		t.Error("Configure accepted a sale id with braces")
	}
	f.configure(t, s)
	f.join(t, "alice")
	s.Shuffle = true
	if err := f.room.Configure(t.Context(), f.sale, s); !errors.Is(err, waitroom.ErrInvalidSettings) {
		t.Errorf("turning the shuffle on after a join: %v, want ErrInvalidSettings", err)
	}
	s.Shuffle, s.AdmitRate = false, 5
	if err := f.room.Configure(t.Context(), f.sale, s); err != nil {
		t.Errorf("changing the rate: %v", err)
	}
	if _, err := f.room.Join(t.Context(), f.sale, "not a user"); err == nil {
		t.Error("Join accepted a buyer id with a space")
	}
}

// TestJoinIsIdempotent: 50 racing joins of one buyer, through three replicas, hand out one
// ticket; 50 other buyers racing beside them get one ticket each, all different.
func TestJoinIsIdempotent(t *testing.T) {
	t.Parallel()
	const n = 50
	f := newFixture(t)
	f.configure(t, f.settings(t))
	rooms := []*Room{f.room, f.replica(t), f.replica(t)}
	var mu sync.Mutex
	alice, others := map[int64]int{}, map[int64]string{}
	parallel(t, 2*n, func(i int) error {
		buyer := "alice"
		if i%2 == 1 {
			buyer = fmt.Sprintf("o%d", i)
		}
		st, err := rooms[i%len(rooms)].Join(t.Context(), f.sale, buyer)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if buyer == "alice" {
			alice[st.Ticket]++
		} else if prev, dup := others[st.Ticket]; dup {
			return fmt.Errorf("ticket %d went to %s and %s", st.Ticket, prev, buyer)
		} else {
			others[st.Ticket] = buyer
		}
		if st.State != waitroom.Waiting {
			return fmt.Errorf("%s: state %v, want waiting", buyer, st.State)
		}
		return nil
	})
	if len(alice) != 1 {
		t.Fatalf("alice's 50 joins got tickets %v, want one", alice)
	}
	issued, err := f.rdb.HGet(t.Context(), f.room.Keys(f.sale).Meta, "issued").Int()
	if err != nil || issued != n+1 {
		t.Fatalf("issued %d (%v), want %d", issued, err, n+1)
	}
	if st := f.join(t, "alice"); alice[st.Ticket] != n {
		t.Fatalf("alice's next join: ticket %d, want the one of her 50", st.Ticket)
	}
}

// TestFIFO: after the opening, tickets follow the order of joining, and so does admission.
func TestFIFO(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.settings(t)
	s.AdmitRate = 5 // a burst of 5: admission comes in batches
	f.configure(t, s)
	bs := buyers(12)
	for i, b := range bs {
		st := f.join(t, b)
		if st.Ticket != int64(i+1) || st.State != waitroom.Waiting || st.Ahead() != int64(i) {
			t.Fatalf("%s: %+v, want ticket %d, waiting behind %d", b, st, i+1, i)
		}
	}
	var got []string
	for len(got) < len(bs) {
		a := f.admit(t)
		got = append(got, a.Admitted...)
		if len(a.Admitted) == 0 {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if diff := cmp.Diff(bs, got); diff != "" {
		t.Fatalf("admission order (-want +got):\n%s", diff)
	}
	st := f.status(t, "b1")
	if st.State != waitroom.Admitted || st.SessionEnds.Sub(st.Now) <= 0 || st.SessionEnds.Sub(st.Now) > s.Session {
		t.Fatalf("b1 after admission: %+v", st)
	}
	if again := f.join(t, "b1"); again.Ticket != 1 || again.State != waitroom.Admitted {
		t.Fatalf("an admitted buyer joining again: %+v, want its ticket, admitted", again)
	}
}

// TestPreQueue: before the opening, joiners wait in the pre-queue; in order and with their place
// known when the room does not shuffle.
func TestPreQueue(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.settings(t)
	s.OpensAt = f.now(t).Add(time.Hour)
	f.configure(t, s)
	for i, b := range buyers(3) {
		st := f.join(t, b)
		if st.State != waitroom.PreQueue || st.Ticket != int64(i+1) {
			t.Fatalf("%s: %+v, want pre_queue, ticket %d", b, st, i+1)
		}
		if w, ok := st.Wait(s); !ok || w < 59*time.Minute {
			t.Fatalf("%s: Wait = %v, %v: want the hour to the opening", b, w, ok)
		}
	}
	if a := f.admit(t); !a.Closed || len(a.Admitted) != 0 {
		t.Fatalf("Admit before the opening: %+v", a)
	}
}
