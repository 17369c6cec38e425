package waitroom

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/seckill-go/seckill-go/internal/sale"
)

// Rooms keeps the sales' waiting rooms, shared by the replicas (internal/waitroom/redisroom's
// Room). Its errors wrap ErrNoRoom for a room that was never configured (or was lost); any other
// is a failure of the store it keeps them in.
type Rooms interface {
	Configure(ctx context.Context, saleID string, s Settings) error
	Join(ctx context.Context, saleID, buyer string) (Status, error)
	Status(ctx context.Context, saleID, buyer string) (Status, error)
}

// PassSigner signs admission passes (internal/waitroom/admit's Signer).
type PassSigner interface {
	Sign(buyer, saleID string, now, expires time.Time) (string, error)
}

// The queue's refusals.
var (
	// ErrNoWaitingRoom means the sale is open: there is no queue to join, the buyer buys directly.
	ErrNoWaitingRoom = errors.New("this sale has no waiting room: buy directly")
	// ErrQueueNotOpen means the sale's queue does not take visitors yet (a *QueueNotOpenError
	// says when it will).
	ErrQueueNotOpen = errors.New("the sale's queue is not open yet")
)

// QueueNotOpenError is ErrQueueNotOpen with the queue's opening.
type QueueNotOpenError struct{ OpensAt time.Time }

func (e *QueueNotOpenError) Error() string {
	return fmt.Sprintf("%v: it opens at %s", ErrQueueNotOpen, e.OpensAt.UTC().Format(time.RFC3339))
}

// Unwrap makes errors.Is(err, ErrQueueNotOpen) hold.
func (e *QueueNotOpenError) Unwrap() error { return ErrQueueNotOpen }

// Ticket is a visitor's answer from the queue: its Status in the sale's room, what the estimate
// and the next poll are, and, once it is admitted, its pass.
type Ticket struct {
	// SaleID is the sale's (sale.Product.SaleID): the room and the pass's "sale".
	SaleID string
	Status
	// Wait is the estimated wait (Status.Wait); WaitKnown is false when there is none to give.
	Wait      time.Duration
	WaitKnown bool
	// PollAfter is when the visitor should ask again: soon enough that its polls keep it from
	// being skipped as abandoned, and no sooner than its place can change much. 0 when polling
	// is no use (it must join again, or holds a pass until its session ends).
	PollAfter time.Duration
	// Pass is the signed admission pass of an Admitted visitor, valid until PassExpires (the
	// session's end, to the second below); empty otherwise, and in the last second of a session.
	Pass        string
	PassExpires time.Time
}

// Poll bounds: a visitor polls at least every MaxPoll (and three times per abandon timeout, so
// that a lost poll or two does not get it skipped), at most every MinPoll.
const (
	MinPoll = 500 * time.Millisecond
	MaxPoll = 5 * time.Second
)

// Queue is the visitors' side of the sales' waiting rooms: join, poll, and the pass once
// admitted. It configures a sale's room from the product the first time this replica serves it
// (and again if the room was lost), so that nothing needs to set a room up before its visitors
// come. It never admits anyone: that is the replicas' admission ticker's job. Safe for
// concurrent use.
type Queue struct {
	rooms  Rooms
	signer PassSigner
	now    func() time.Time
	// configured holds the sale ids whose room this replica has configured. A sale id names one
	// epoch, whose settings never change (a reset starts a new one), so once is enough.
	configured sync.Map
}

// NewQueue returns the queue over rooms, signing passes with signer; now (the replica's clock,
// for the queue's opening and the sale's end) defaults to time.Now.
func NewQueue(rooms Rooms, signer PassSigner, now func() time.Time) (*Queue, error) {
	if rooms == nil || signer == nil {
		return nil, errors.New("waitroom: NewQueue needs Rooms and a PassSigner")
	}
	if now == nil {
		now = time.Now
	}
	return &Queue{rooms: rooms, signer: signer, now: now}, nil
}

// Join puts buyer in product p's queue, or finds it there (idempotent while its ticket lives; see
// Rooms.Join), and answers its ticket.
func (q *Queue) Join(ctx context.Context, p sale.Product, buyer string) (Ticket, error) {
	return q.visit(ctx, p, buyer, q.rooms.Join)
}

// Status answers buyer's ticket in product p's queue; it is the visitor's heartbeat. A buyer who
// never joined is NotJoined.
func (q *Queue) Status(ctx context.Context, p sale.Product, buyer string) (Ticket, error) {
	return q.visit(ctx, p, buyer, q.rooms.Status)
}

func (q *Queue) visit(ctx context.Context, p sale.Product, buyer string, op func(context.Context, string, string) (Status, error)) (Ticket, error) {
	if err := sale.ValidateUserID(buyer); err != nil {
		return Ticket{}, err
	}
	if !p.Admission.WaitingRoom() {
		return Ticket{}, ErrNoWaitingRoom
	}
	now := q.now()
	if err := p.CheckWindow(now); errors.Is(err, sale.ErrSaleEnded) {
		return Ticket{}, err
	}
	if opens := p.Admission.QueueOpening(p.SaleStartsAt); now.Before(opens) {
		return Ticket{}, &QueueNotOpenError{OpensAt: opens}
	}
	id, st := p.SaleID(), SettingsOf(p)
	if _, ok := q.configured.Load(id); !ok {
		if err := q.configure(ctx, id, st); err != nil {
			return Ticket{}, err
		}
	}
	s, err := op(ctx, id, buyer)
	if errors.Is(err, ErrNoRoom) {
		// Configured by this replica, and gone since (a Redis that lost its data, an operator's
		// delete): set it up again; its visitors join again, at the back.
		if err := q.configure(ctx, id, st); err != nil {
			return Ticket{}, err
		}
		s, err = op(ctx, id, buyer)
	}
	if err != nil {
		return Ticket{}, fmt.Errorf("%w: waiting room of sale %s: %w", sale.ErrUnavailable, id, err)
	}
	return q.ticket(id, buyer, s, st)
}

func (q *Queue) configure(ctx context.Context, id string, st Settings) error {
	if err := q.rooms.Configure(ctx, id, st); err != nil {
		return fmt.Errorf("%w: configure the waiting room of sale %s: %w", sale.ErrUnavailable, id, err)
	}
	q.configured.Store(id, struct{}{})
	return nil
}

// ticket makes buyer's answer from its status s in sale id's room of settings st.
func (q *Queue) ticket(id, buyer string, s Status, st Settings) (Ticket, error) {
	t := Ticket{SaleID: id, Status: s}
	t.Wait, t.WaitKnown = s.Wait(st)
	poll := min(MaxPoll, st.AbandonAfter/3)
	switch s.State {
	case PreQueue, Waiting:
		if t.WaitKnown {
			poll = min(max(t.Wait/2, MinPoll), poll)
		}
	case Admitted:
		left := s.SessionEnds.Sub(s.Now)
		t.PollAfter = max(left, 0)
		if left < time.Second {
			// The pass's dates are whole seconds: in its last second a session has no pass to
			// give. The next poll finds it over.
			return t, nil
		}
		pass, err := q.signer.Sign(buyer, id, s.Now, s.SessionEnds)
		if err != nil {
			return Ticket{}, fmt.Errorf("waitroom: the pass of %s in sale %s: %w", buyer, id, err)
		}
		t.Pass, t.PassExpires = pass, s.SessionEnds.Truncate(time.Second)
		return t, nil
	case SoldOut:
		// It keeps its place: a unit that comes back is its turn, if it is next.
	default: // NotJoined, Abandoned, SessionOver: only a join helps.
		poll = 0
	}
	t.PollAfter = poll
	return t, nil
}
