// Package redisroom keeps a sale's waiting room (internal/waitroom) in Redis, shared by every
// replica: one server, a Sentinel set or a Cluster. Every key of one sale's room shares one hash
// tag, so that a Cluster keeps the room in one slot and each decision is one Lua script over all
// of them, atomic without a lock.
//
// The room is the two counters of a ticket queue (AWS's Virtual Waiting Room has the same pair): a
// join takes the next ticket (issued), and Admit moves the serving counter (served) forward at the
// room's rate, skipping visitors who went silent. Admission is active, its delivery lazy: Admit is
// the only call that admits, and a visitor learns of it at its next poll (Status), where the
// caller signs its pass (internal/waitroom/admit). Why not admit inside the polls: a poll stays a
// few O(1) commands whatever the queue holds, the walk past abandoned tickets is paid by one
// caller at its own pace rather than by every poll, and no visitor's place depends on who polls
// when. Any replica may call Admit, as often as it likes, all at once: the rate is counted in
// Redis, on Redis's clock, so N callers admit no more than one would — every replica runs one
// ticker (waitroom.Ticker), so that the room does not stop with any of them.
//
// Every time the room uses is Redis's (TIME inside the scripts), never a caller's: the replicas'
// clocks may disagree, and heartbeats, sessions, the opening and the rate must all be read on one
// clock. So the methods take no "now"; the Status they return carries the room's.
//
// It never signs passes and never decides a purchase; it knows nothing of stock but what its
// callers tell it (SoldOut, Returned).
package redisroom

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/waitroom"
)

var (
	//go:embed room.lua
	roomLua string
	//go:embed join.lua
	joinLua string
	//go:embed status.lua
	statusLua string
	//go:embed admit.lua
	admitLua string

	// Each script starts with room.lua: the room's clock, its settings and its opening.
	joinScript   = redis.NewScript(roomLua + joinLua)
	statusScript = redis.NewScript(roomLua + statusLua)
	admitScript  = redis.NewScript(roomLua + admitLua)
)

// MaxWalk is the most tickets one Admit walks past (admitted or skipped): it bounds how long one
// script holds Redis (a few microseconds a ticket), and Admission.More tells the caller to call
// again at once.
const MaxWalk = 1000

// Keys are the Redis keys of one sale's waiting room (see room.lua for what each holds).
type Keys struct {
	Meta, Tickets, Line, Pre, Seen, Active string
}

// KeysFor returns the keys of saleID's room under namespace ns (deployments and tests sharing a
// Redis are kept apart by it). The hash tag is {ns:saleID}: every key of the room in one slot.
func KeysFor(ns, saleID string) Keys {
	tag := "waitroom:{" + ns + ":" + saleID + "}:"
	return Keys{Meta: tag + "meta", Tickets: tag + "tickets", Line: tag + "line", Pre: tag + "pre", Seen: tag + "seen", Active: tag + "active"}
}

// All returns every key, in the order the scripts take them.
func (k Keys) All() []string { return []string{k.Meta, k.Tickets, k.Line, k.Pre, k.Seen, k.Active} }

var (
	_ waitroom.Rooms      = (*Room)(nil)
	_ waitroom.AdmitRooms = (*Room)(nil)
)

// Room keeps the waiting rooms of sales in Redis. It is safe for concurrent use, and any number
// of Rooms, in any number of replicas, may share the rooms of one Redis.
type Room struct {
	rdb redis.Cmdable
	ns  string
}

// New returns a Room on rdb, its keys under namespace ns (the app uses its database name).
func New(rdb redis.Cmdable, ns string) (*Room, error) {
	if rdb == nil || ns == "" || strings.ContainsAny(ns, "{}") {
		return nil, errors.New("redisroom: a Redis client and a namespace without braces are required")
	}
	return &Room{rdb: rdb, ns: ns}, nil
}

// Keys returns the keys of saleID's room: for the load test and the operators, who read them.
func (r *Room) Keys(saleID string) Keys { return KeysFor(r.ns, saleID) }

// configureScript writes the settings. A new rate starts its count afresh (start, used) at the
// room's clock: counted from the opening, a lower rate would owe the admissions the higher one
// gave, and stall the room for as long again, and a higher one would owe a burst.
var configureScript = redis.NewScript(strings.TrimSpace(`
local cur = redis.call('HMGET', KEYS[1], 'shuffle', 'issued', 'rate', 'clock')
if cur[2] and tonumber(cur[2]) > 0 and cur[1] ~= ARGV[2] then
	return 'shuffle_locked'
end
if cur[3] and tonumber(cur[3]) ~= tonumber(ARGV[3]) then
	local t = redis.call('TIME')
	local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
	redis.call('HSET', KEYS[1], 'start', math.max(now, tonumber(cur[4] or '0')), 'used', 0)
end
redis.call('HSET', KEYS[1], 'opens', ARGV[1], 'shuffle', ARGV[2], 'rate', ARGV[3], 'max', ARGV[4],
	'session', ARGV[5], 'abandon', ARGV[6])
return 'ok'`))

// Configure creates saleID's room with settings s, or changes its settings: the rate, the
// sessions, the abandon timeout and the opening (before it comes) take effect at the next call.
// The shuffle cannot change once anyone has joined (whether joiners got a place or wait for the
// draw is decided at their join).
func (r *Room) Configure(ctx context.Context, saleID string, s waitroom.Settings) error {
	if err := waitroom.ValidateSaleID(saleID); err != nil {
		return fmt.Errorf("redisroom: %w", err)
	}
	if s.Mode != waitroom.WaitingRoom {
		return fmt.Errorf("redisroom: sale %s: %w: only a waiting_room sale has a room, not %q", saleID, waitroom.ErrInvalidSettings, s.Mode)
	}
	if err := s.Validate(); err != nil {
		return fmt.Errorf("redisroom: sale %s: %w", saleID, err)
	}
	shuffle := "0"
	if s.Shuffle {
		shuffle = "1"
	}
	res, err := configureScript.Run(ctx, r.rdb, []string{r.Keys(saleID).Meta}, s.OpensAt.UnixMilli(), shuffle,
		strconv.FormatFloat(s.AdmitRate, 'f', -1, 64), s.MaxActive, s.Session.Milliseconds(), s.AbandonAfter.Milliseconds()).Text()
	if err != nil {
		return fmt.Errorf("redisroom: configure sale %s: %w", saleID, err)
	}
	if res != "ok" {
		return fmt.Errorf("redisroom: configure sale %s: %w: the shuffle cannot change once visitors have joined", saleID, waitroom.ErrInvalidSettings)
	}
	return nil
}

// Join puts buyer in saleID's line, or finds it there: a join is idempotent while the buyer's
// ticket lives (in line, or admitted with its session running), however many requests race; a
// buyer skipped as abandoned or whose session ended starts again at the back. The answer is the
// buyer's Status.
func (r *Room) Join(ctx context.Context, saleID, buyer string) (waitroom.Status, error) {
	return r.visitor(ctx, joinScript, "join", saleID, buyer)
}

// Status is buyer's place in saleID's room, and a heartbeat: a visitor who polls is not skipped
// as abandoned. A buyer who never joined is NotJoined (and not recorded).
func (r *Room) Status(ctx context.Context, saleID, buyer string) (waitroom.Status, error) {
	return r.visitor(ctx, statusScript, "status", saleID, buyer)
}

func (r *Room) visitor(ctx context.Context, s *redis.Script, op, saleID, buyer string) (waitroom.Status, error) {
	if err := validate(saleID, buyer); err != nil {
		return waitroom.Status{}, fmt.Errorf("redisroom: %s: %w", op, err)
	}
	res, err := s.Run(ctx, r.rdb, r.Keys(saleID).All(), seed(), buyer).Slice()
	if err != nil {
		return waitroom.Status{}, fmt.Errorf("redisroom: %s sale %s: %w", op, saleID, err)
	}
	st, err := parseStatus(res)
	if err != nil {
		return waitroom.Status{}, fmt.Errorf("redisroom: %s sale %s: %w", op, saleID, err)
	}
	return st, nil
}

func validate(saleID, buyer string) error {
	if err := waitroom.ValidateSaleID(saleID); err != nil {
		return err
	}
	if err := sale.ValidateUserID(buyer); err != nil {
		return err
	}
	return nil
}

// seed is a random seed for the opening's shuffle, sent with every call since any call may be
// the one that opens the room. It comes from crypto/rand: a visitor who could guess it could
// compute the draw. Redis seeds its Lua generator with a 32-bit int, so 31 bits it is.
func seed() int64 {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return int64(binary.LittleEndian.Uint32(b[:]) & 0x7fffffff)
}
