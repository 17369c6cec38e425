package orderqueue

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/order"
)

// TestDecodeOrderID: the consumer reads the order id of the events the relay writes, and refuses
// what it cannot trust.
func TestDecodeOrderID(t *testing.T) {
	written, err := json.Marshal(Event{Version: eventVersion, OrderID: "o-1", ReservationID: 7, ProductID: 3,
		UserID: "u", Quantity: 1, Strategy: "mysql", ReservedAt: time.Now().UTC()})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, value, want string
	}{
		{"written by the relay", string(written), "o-1"},
		{"fields in any order", `{"order_id":"o-2","extra":[1,{"a":null}],"v":1}`, "o-2"},
		{"escaped", `{"v":1,"order_id":"o-\u0033"}`, "o-3"},
		{"other version", `{"v":2,"order_id":"o-1"}`, ""},
		{"no order id", `{"v":1}`, ""},
		{"order id too long", `{"v":1,"order_id":"` + strings.Repeat("x", 41) + `"}`, ""},
		{"not JSON", `o-1`, ""},
		{"order id not a string", `{"v":1,"order_id":7}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeOrderID([]byte(tt.value))
			if tt.want == "" {
				if err == nil {
					t.Fatalf("decodeOrderID(%s) = %q, want an error", tt.value, got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("decodeOrderID(%s) = %q, %v; want %q", tt.value, got, err, tt.want)
			}
		})
	}
}

// TestDecodeEventID: the event consumer reads the event id of the messages the event relay
// writes, and refuses what names no event.
func TestDecodeEventID(t *testing.T) {
	written, err := json.Marshal(order.LifecycleEvent{ID: 42, Kind: "order.paid", OrderID: "o-1", ProductID: 3, UserID: "u",
		Quantity: 1, At: time.Now().UTC()})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, value string
		want        int64
	}{
		{"written by the relay", string(written), 42},
		{"fields in any order", `{"kind":"order.expired","extra":[1],"event_id":7}`, 7},
		{"no event id", `{"kind":"order.paid"}`, 0},
		{"event id zero", `{"event_id":0}`, 0},
		{"event id negative", `{"event_id":-3}`, 0},
		{"event id not a number", `{"event_id":"7"}`, 0},
		{"not JSON", `7`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeEventID([]byte(tt.value))
			if tt.want == 0 {
				if err == nil {
					t.Fatalf("decodeEventID(%s) = %d, want an error", tt.value, got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("decodeEventID(%s) = %d, %v; want %d", tt.value, got, err, tt.want)
			}
		})
	}
}
