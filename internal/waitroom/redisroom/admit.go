package redisroom

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/waitroom"
)

// Admission is what one Admit did.
type Admission struct {
	// At is the room's clock (Redis's) when it decided.
	At time.Time
	// Admitted are the buyers admitted now, in the order of their tickets. Their sessions end at
	// At plus the session; each learns it at its next Status.
	Admitted []string
	// Skipped is how many tickets of abandoned visitors it passed over.
	Skipped int
	// Served is the serving counter after it.
	Served int64
	// More says the walk stopped at MaxWalk with admissions left to give: call again now.
	More bool
	// Closed says the room has not opened yet: nothing was admitted.
	Closed bool
}

// Admit moves saleID's serving counter forward by as many admissions as the rate, the free
// sessions and (once sold out) the returned units allow, skipping abandoned visitors (see
// admit.lua for the rules). It is safe to call from every replica at any frequency: the bounds
// are counted in Redis, so more callers admit no more. The rate allows a second's worth at once
// at most, so a caller should come back at least every second or the room admits below its rate.
func (r *Room) Admit(ctx context.Context, saleID string) (Admission, error) {
	if err := waitroom.ValidateSaleID(saleID); err != nil {
		return Admission{}, fmt.Errorf("redisroom: admit: %w", err)
	}
	res, err := admitScript.Run(ctx, r.rdb, r.Keys(saleID).All(), seed(), MaxWalk).Slice()
	if err != nil {
		return Admission{}, fmt.Errorf("redisroom: admit sale %s: %w", saleID, err)
	}
	a, err := parseAdmission(res)
	if err != nil {
		return Admission{}, fmt.Errorf("redisroom: admit sale %s: %w", saleID, err)
	}
	return a, nil
}

// AdmitNext is Admit for the replicas' admission ticker (waitroom.Ticker): whether it stopped
// short with admissions left to give (call again at once).
func (r *Room) AdmitNext(ctx context.Context, saleID string) (bool, error) {
	a, err := r.Admit(ctx, saleID)
	return a.More, err
}

func parseAdmission(res []any) (Admission, error) {
	word, _ := first(res)
	switch {
	case word == "no_room":
		return Admission{}, waitroom.ErrNoRoom
	case word == "closed" && len(res) == 3:
		at, served, err := ints2(res[1], res[2])
		return Admission{At: time.UnixMilli(at), Served: served, Closed: true}, err
	case word != "admitted" || len(res) < 5:
		return Admission{}, fmt.Errorf("reply %v", res)
	}
	n, err := ints(res[1:5]...)
	if err != nil {
		return Admission{}, fmt.Errorf("reply %v: %w", res, err)
	}
	a := Admission{At: time.UnixMilli(n[0]), Served: n[1], Skipped: int(n[2]), More: n[3] == 1}
	for _, v := range res[5:] {
		b, ok := v.(string)
		if !ok {
			return Admission{}, fmt.Errorf("reply %v: buyer %v", res, v)
		}
		a.Admitted = append(a.Admitted, b)
	}
	return a, nil
}

var stateOf = map[string]waitroom.State{
	"not_joined": waitroom.NotJoined, "pre_queue": waitroom.PreQueue, "waiting": waitroom.Waiting,
	"admitted": waitroom.Admitted, "sold_out": waitroom.SoldOut, "abandoned": waitroom.Abandoned,
	"session_over": waitroom.SessionOver,
}

// parseStatus reads room.lua's answer: state, ticket, served, opens, session end, now.
func parseStatus(res []any) (waitroom.Status, error) {
	word, _ := first(res)
	if word == "no_room" {
		return waitroom.Status{}, waitroom.ErrNoRoom
	}
	state, ok := stateOf[word]
	if !ok || len(res) != 6 {
		return waitroom.Status{}, fmt.Errorf("reply %v", res)
	}
	n, err := ints(res[1:]...)
	if err != nil {
		return waitroom.Status{}, fmt.Errorf("reply %v: %w", res, err)
	}
	st := waitroom.Status{State: state, Ticket: n[0], Served: n[1], OpensAt: time.UnixMilli(n[2]), Now: time.UnixMilli(n[4])}
	if n[3] > 0 {
		st.SessionEnds = time.UnixMilli(n[3])
	}
	return st, nil
}

func first(res []any) (string, bool) {
	if len(res) == 0 {
		return "", false
	}
	s, ok := res[0].(string)
	return s, ok
}

func ints(vs ...any) ([]int64, error) {
	out := make([]int64, len(vs))
	for i, v := range vs {
		n, ok := v.(int64)
		if !ok {
			return nil, fmt.Errorf("%v is not an integer", v)
		}
		out[i] = n
	}
	return out, nil
}

func ints2(a, b any) (int64, int64, error) {
	n, err := ints(a, b)
	if err != nil {
		return 0, 0, err
	}
	return n[0], n[1], nil
}

var soldOutScript = redis.NewScript(strings.TrimSpace(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'soldout', '1')
return 1`))

// SoldOut marks saleID's room sold out: from now every visitor in line is told so at its next
// poll (no queue walk, one flag the answers read), and Admit admits only returned units. The
// visitors keep their places, for the units that come back.
func (r *Room) SoldOut(ctx context.Context, saleID string) error {
	return r.mark(ctx, soldOutScript, "sold out", saleID)
}

var returnedScript = redis.NewScript(strings.TrimSpace(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HINCRBY', KEYS[1], 'credit', ARGV[1])
return 1`))

// Returned tells saleID's room that n units came back: once the room is sold out, Admit admits
// that many more visitors, the next in line (at the room's rate, within its sessions), and they
// are told they wait rather than sold out meanwhile.
//
// The units are counted whenever they come, even before the room is sold out: a return that
// overtakes the sold-out mark it follows (two replicas' calls race) is not lost. The price: units
// returned while admission ran, which it sold anyway, let as many more visitors in after the
// sell-out, to find it sold out; a few wasted admissions rather than units nobody is let in to
// buy.
func (r *Room) Returned(ctx context.Context, saleID string, n int) error {
	if n < 1 {
		return fmt.Errorf("redisroom: returned %d units: want at least 1", n)
	}
	return r.mark(ctx, returnedScript, "returned", saleID, n)
}

func (r *Room) mark(ctx context.Context, s *redis.Script, op, saleID string, args ...any) error {
	if err := waitroom.ValidateSaleID(saleID); err != nil {
		return fmt.Errorf("redisroom: %s: %w", op, err)
	}
	ok, err := s.Run(ctx, r.rdb, []string{r.Keys(saleID).Meta}, args...).Int()
	if err != nil {
		return fmt.Errorf("redisroom: %s sale %s: %w", op, saleID, err)
	}
	if ok == 0 {
		return fmt.Errorf("redisroom: %s sale %s: %w", op, saleID, waitroom.ErrNoRoom)
	}
	return nil
}

// Delete removes saleID's room and everyone in it: for a sale that ended, and for tests.
func (r *Room) Delete(ctx context.Context, saleID string) error {
	if err := r.rdb.Del(ctx, r.Keys(saleID).All()...).Err(); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("redisroom: delete sale %s: %w", saleID, err)
	}
	return nil
}
