package waitroom_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/waitroom"
)

// creditLog records the credits Returns gives, and answers err.
type creditLog struct {
	credits []string
	err     error
}

func (c *creditLog) Returned(_ context.Context, saleID string, n int) error {
	c.credits = append(c.credits, fmt.Sprintf("%s+%d", saleID, n))
	return c.err
}

// TestReturnsTellOnlyTheWaitingRoomOfTheEpoch: returned units credit the room of the product's
// sale when it has a waiting room and the units are of its epoch; an open sale, a past epoch and
// a room nobody created are told nothing, without an error; a room's failure is the caller's.
func TestReturnsTellOnlyTheWaitingRoomOfTheEpoch(t *testing.T) {
	room := queuedProduct(7)
	room.Epoch = 3
	open := queuedProduct(8)
	open.Admission = sale.AdmissionRule{Mode: sale.AdmissionOpen}
	products := map[int64]sale.Product{room.ID: room, open.ID: open}
	read := func(_ context.Context, id int64) (sale.Product, error) {
		p, ok := products[id]
		if !ok {
			return sale.Product{}, sale.ErrNotFound
		}
		return p, nil
	}
	for _, tc := range []struct {
		name      string
		product   int64
		epoch     uint64
		roomErr   error
		credits   []string
		wantError bool
	}{
		{"a waiting room", room.ID, 3, nil, []string{fmt.Sprint(room.ID, ".3+2")}, false},
		{"a past epoch", room.ID, 2, nil, nil, false},
		{"an open sale", open.ID, open.Epoch, nil, nil, false},
		{"no room", room.ID, 3, waitroom.ErrNoRoom, []string{fmt.Sprint(room.ID, ".3+2")}, false},
		{"the room's store away", room.ID, 3, errors.New("redis down"), []string{fmt.Sprint(room.ID, ".3+2")}, true},
		{"an unknown product", 99, 1, nil, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := &creditLog{err: tc.roomErr}
			r, err := waitroom.NewReturns(log, read)
			if err != nil {
				t.Fatal(err)
			}
			err = r.Returned(t.Context(), tc.product, tc.epoch, 2)
			if (err != nil) != tc.wantError {
				t.Errorf("Returned: %v, want an error: %v", err, tc.wantError)
			}
			if diff := cmp.Diff(tc.credits, log.credits); diff != "" {
				t.Errorf("credits (-want +got):\n%s", diff)
			}
		})
	}
}
