package waitroom

import (
	"errors"
	"math"
	"strconv"
	"time"
)

// State is where a visitor stands in a sale's waiting room.
type State int

// The states. A visitor's state only moves forward, but for Join after Abandoned or SessionOver,
// which starts it again at the back of the line.
const (
	// NotJoined: the visitor never joined (or the room was deleted).
	NotJoined State = iota + 1
	// PreQueue: the visitor joined before the opening and waits for it.
	PreQueue
	// Waiting: the visitor is in line; Status.Ahead visitors are before it.
	Waiting
	// Admitted: the visitor may buy until Status.SessionEnds; the caller hands it a pass.
	Admitted
	// SoldOut: the sale sold out before the visitor's turn. It keeps its place: units that come
	// back go to the next in line.
	SoldOut
	// Abandoned: the visitor was silent for longer than the abandon timeout when its turn came,
	// and was skipped. It may join again, at the back.
	Abandoned
	// SessionOver: the visitor was admitted and its session ended. It may join again, at the back.
	SessionOver
)

var stateNames = [...]string{NotJoined: "not_joined", PreQueue: "pre_queue", Waiting: "waiting",
	Admitted: "admitted", SoldOut: "sold_out", Abandoned: "abandoned", SessionOver: "session_over"}

// String returns the state's stable name, e.g. "pre_queue": the name an API answers with.
func (s State) String() string {
	if s >= NotJoined && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// ErrNoRoom means the sale has no waiting room: it was never configured, or it was deleted.
var ErrNoRoom = errors.New("the sale has no waiting room")

// Status is the waiting room's answer to one visitor: what a join or a poll returns.
type Status struct {
	State State
	// Ticket is the visitor's number in line, from 1; 0 while it is in a pre-queue the opening
	// shuffles, where no place is drawn yet.
	Ticket int64
	// Served is the serving counter: every ticket up to it was admitted or skipped.
	Served int64
	// OpensAt is when admission starts (the settings').
	OpensAt time.Time
	// SessionEnds is when the admission ends (Admitted, SessionOver): the pass's expiry.
	SessionEnds time.Time
	// Now is the room's clock when it answered (Redis's, not the replica's).
	Now time.Time
}

// Ahead is how many tickets are in line before the visitor's: an upper bound on the visitors it
// waits for, since some ahead of it will be skipped as abandoned. 0 when it is not in line.
func (s Status) Ahead() int64 {
	if s.Ticket == 0 || s.Ticket <= s.Served || (s.State != Waiting && s.State != PreQueue && s.State != SoldOut) {
		return 0
	}
	return s.Ticket - s.Served - 1
}

// Wait estimates how long the visitor waits for its admission under settings st: the time left
// until the opening, then ETA at the settings' Throughput. It is false when there is nothing to
// estimate: the visitor is not waiting, the sale is sold out, or its place in a shuffled
// pre-queue is not drawn yet (the opening is all that is known).
func (s Status) Wait(st Settings) (time.Duration, bool) {
	if s.State != Waiting && s.State != PreQueue || s.Ticket == 0 {
		return 0, false
	}
	d, ok := ETA(s.Ticket, s.Served, st.Throughput())
	if !ok {
		return 0, false
	}
	if s.OpensAt.After(s.Now) {
		d = min(d+s.OpensAt.Sub(s.Now), MaxETA)
	}
	return d, true
}

// MaxETA is the longest wait ETA states: a longer one is no more useful to a visitor, and a
// Duration overflows past 292 years.
const MaxETA = 24 * time.Hour

// ETA estimates the wait of the visitor holding ticket when the serving counter is at served and
// visitors are admitted perSecond: it waits for ticket − served admissions, its own the last.
// Skipped visitors make the real wait shorter, a full MaxActive longer (Settings.Throughput
// folds that in). It is false for a rate that is not a positive number.
func ETA(ticket, served int64, perSecond float64) (time.Duration, bool) {
	if !(perSecond > 0) || math.IsInf(perSecond, 1) {
		return 0, false
	}
	n := float64(ticket) - float64(served) // in floats: an int64 difference can overflow
	if n <= 0 {
		return 0, true
	}
	secs := n / perSecond
	if secs >= MaxETA.Seconds() {
		return MaxETA, true
	}
	return time.Duration(secs * float64(time.Second)), true
}
