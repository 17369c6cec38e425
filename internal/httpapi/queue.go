package httpapi

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/waitroom"
)

// Queue is the sales' waiting rooms as the HTTP layer needs them; *waitroom.Queue implements it.
type Queue interface {
	Join(ctx context.Context, p sale.Product, buyer string) (waitroom.Ticket, error)
	Status(ctx context.Context, p sale.Product, buyer string) (waitroom.Ticket, error)
}

// The queue's refusals, with codes of their own (errorTable).
const (
	codeNoWaitingRoom = "no_waiting_room"
	codeQueueNotOpen  = "queue_not_open"
)

// ticketJSON is a visitor's answer from a sale's queue (waitroom.Ticket).
type ticketJSON struct {
	ProductID int64  `json:"product_id"`
	Sale      string `json:"sale"`
	// State is waitroom.State's name: pre_queue, waiting, admitted, sold_out, abandoned,
	// session_over or not_joined.
	State  string `json:"state"`
	Ticket int64  `json:"ticket"`
	Ahead  int64  `json:"ahead"`
	// ETASeconds is the estimated wait, rounded up; null when there is none to give.
	ETASeconds  *int64 `json:"eta_seconds"`
	OpensAt     string `json:"opens_at"`
	PollAfterMS int64  `json:"poll_after_ms"`
	// Pass and PassExpiresAt are the admitted visitor's (the Admission-Pass of its purchase).
	Pass          string `json:"pass,omitempty"`
	PassExpiresAt string `json:"pass_expires_at,omitempty"`
}

func toTicketJSON(id int64, t waitroom.Ticket) ticketJSON {
	out := ticketJSON{
		ProductID:   id,
		Sale:        t.SaleID,
		State:       t.State.String(),
		Ticket:      t.Ticket,
		Ahead:       t.Ahead(),
		OpensAt:     formatTime(t.OpensAt),
		PollAfterMS: t.PollAfter.Milliseconds(),
		Pass:        t.Pass,
	}
	if t.WaitKnown {
		secs := int64((t.Wait + 999_999_999) / 1_000_000_000)
		out.ETASeconds = &secs
	}
	if t.Pass != "" {
		out.PassExpiresAt = formatTime(t.PassExpires)
	}
	return out
}

// joinQueue puts the buyer in the product's queue (POST, idempotent per buyer) and answers its
// ticket.
func (h *handlers) joinQueue(c *gin.Context) { h.queueVisit(c, true) }

// queueStatus answers the buyer's ticket (GET ?user_id=…): the visitor's heartbeat, and where an
// admitted visitor gets its pass.
func (h *handlers) queueStatus(c *gin.Context) { h.queueVisit(c, false) }

// queueVisit reads the product from the board (no database read per poll) and the buyer as a
// purchase does (the body's user_id, or the query's for the GET; with buyer tokens, the token's
// subject), and asks the queue.
func (h *handlers) queueVisit(c *gin.Context, join bool) {
	id, err := productID(c)
	var claimed string
	if err == nil {
		if join {
			var body orderBuyerJSON
			err = decodeJSON(c.Request.Body, &body)
			claimed = body.UserID
		} else {
			claimed, err = onlyQuery(c, "user_id")
		}
	}
	var buyer string
	if err == nil {
		buyer, err = h.buyerID(c, claimed)
	}
	if err == nil && buyer == "" {
		err = &sale.ValidationError{Field: "user_id", Reason: "is required: a buyer queues as itself"}
	}
	if err == nil {
		err = sale.ValidateUserID(buyer)
	}
	if err != nil {
		h.respondError(c, err)
		return
	}
	s, ok := h.snapshot(c)
	if !ok {
		return
	}
	it, ok := s.Item(id)
	if !ok {
		h.respondError(c, sale.ErrNotFound)
		return
	}
	visit := h.queue.Status
	if join {
		visit = h.queue.Join
	}
	t, err := visit(c.Request.Context(), it.Product, buyer)
	if err != nil {
		h.respondError(c, err)
		return
	}
	c.JSON(http.StatusOK, toTicketJSON(id, t))
}
