package store

import (
	"context"
	"strings"
	"unicode/utf8"

	"gorm.io/gorm"

	"github.com/seckill-go/seckill-go/internal/order"
	"github.com/seckill-go/seckill-go/internal/sale"
)

// Poison rows: what the background loops cannot get through is parked rather than
// retried for ever. The outboxes park in place (parked_at, park_error: the claims skip such
// rows); what the consumers and the redis-lua persister cannot apply goes to parked_messages.

// rowErrnos are the MySQL errors a statement fails with because of the values it was given: it
// fails again, the same way, however often it is retried, so a loop isolates the row and parks
// it (classify marks them sale.ErrPoison). Any error not listed here is retried as an outage would be: a wrong guess
// in that direction stalls one batch, a wrong guess in the other would park good rows.
var rowErrnos = map[uint16]bool{
	1048: true, // column cannot be null
	1062: true, // duplicate entry (where IGNORE does not apply)
	1264: true, // out of range value for a column
	1265: true, // data truncated
	1267: true, // illegal mix of collations (two operands)
	1270: true, // illegal mix of collations (three operands: an IN list, say)
	1271: true, // illegal mix of collations (n operands)
	1292: true, // incorrect date/time/number value
	1300: true, // invalid character string
	1366: true, // incorrect string or integer value for a column
	1406: true, // data too long for a column
	1451: true, // a foreign key still refers to the row
	1452: true, // a foreign key names no row
	1644: true, // a SIGNAL (SQLSTATE 45000): a trigger or procedure of the schema refusing the values
	1690: true, // value out of range in an expression
	3819: true, // CHECK constraint violated (MySQL)
	4025: true, // CHECK constraint violated (MariaDB)
}

// ParkOutbox parks reservations the relay can never publish (see order.ParkedEntry): they leave
// the outbox's claims until an operator clears parked_at. It returns the ids it parked now: an
// entry parked already, or published meanwhile, is left as it is.
func (s *Store) ParkOutbox(ctx context.Context, entries []order.ParkedEntry) ([]int64, error) {
	return s.parkRows(ctx, "reservations", entries)
}

// ParkEvents is ParkOutbox for the order events' outbox.
func (s *Store) ParkEvents(ctx context.Context, entries []order.ParkedEntry) ([]int64, error) {
	return s.parkRows(ctx, "order_events", entries)
}

// parkRows parks entries of table, an outbox, one UPDATE each: parking is rare, and each row has
// its own reason.
func (s *Store) parkRows(ctx context.Context, table string, entries []order.ParkedEntry) ([]int64, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	var parked []int64
	err := s.inTx(ctx, "park "+table, func(tx *gorm.DB) error {
		parked = parked[:0]
		for _, e := range entries {
			res := tx.Exec(`UPDATE `+table+` FORCE INDEX (PRIMARY)
				SET parked_at = NOW(6), park_error = ?, claim_owner = NULL, claim_until = NULL
				WHERE id = ? AND published_at IS NULL AND parked_at IS NULL`, clip(e.Reason, 1024), e.ID)
			if res.Error != nil {
				return res.Error
			}
			if res.RowsAffected == 1 {
				parked = append(parked, e.ID)
			}
		}
		return nil
	})
	return parked, err
}

// ParkMessages records messages and stream entries a loop could never apply, and returns those
// it recorded now: one parked before (a redelivery; a round that parked it and died before
// acknowledging it) is not recorded twice. Every value is made to fit its column first (an order
// id the column cannot hold is left out; it is in the payload), so that parking itself can never
// be refused for its values.
func (s *Store) ParkMessages(ctx context.Context, ms []sale.Parked) ([]sale.Parked, error) {
	if len(ms) == 0 {
		return nil, nil
	}
	var fresh []sale.Parked
	err := s.inTx(ctx, "park messages", func(tx *gorm.DB) error {
		fresh = fresh[:0]
		for _, m := range ms {
			var orderID, productID any
			if isASCII(m.OrderID) && m.OrderID != "" && len(m.OrderID) <= 40 {
				orderID = m.OrderID
			}
			if m.ProductID > 0 {
				productID = m.ProductID
			}
			payload := m.Payload
			if payload == nil {
				payload = []byte{}
			}
			res := tx.Exec(`INSERT IGNORE INTO parked_messages (loop_name, source, position, order_id, product_id, payload, error, parked_at)
				VALUES (?, ?, ?, ?, ?, ?, ?, NOW(6))`,
				asciiClip(m.Loop, 16), clip(m.Source, 255), asciiClip(m.Position, 64), orderID, productID, payload, clip(m.Reason, 1024))
			if res.Error != nil {
				return res.Error
			}
			if res.RowsAffected == 1 {
				fresh = append(fresh, m)
			}
		}
		return nil
	})
	return fresh, err
}

// clip returns s as valid UTF-8 of at most n characters.
func clip(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// asciiClip returns s with every byte outside printable ASCII replaced by '?', cut to n bytes.
func asciiClip(s string, n int) string {
	b := []byte(s[:min(len(s), n)])
	for i, c := range b {
		if c < 0x20 || c > 0x7e {
			b[i] = '?'
		}
	}
	return string(b)
}

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
