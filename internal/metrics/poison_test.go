package metrics

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPoisonRows: every loop's series exists at 0 from the start, and each loop's parked rows land
// in its own, the lifecycle's relay and consumer apart from the order pipeline's, the checkout's
// loops beside them.
func TestPoisonRows(t *testing.T) {
	m := New()
	l := m.RegisterLifecycle()
	c := m.RegisterCheckout()
	if n := seriesCount(t, m, "seckill_poison_rows_total"); n != len(poisonLoops) {
		t.Fatalf("%d series at the start, want %d", n, len(poisonLoops))
	}
	m.RelayParked(2)
	m.ConsumerParked(1)
	l.RelayParked(3)
	l.ConsumerParked(4)
	m.PoisonRows("persister", 5)
	m.PoisonRows("persister", 0)
	c.OrderParked("return")
	got := map[string]float64{}
	for _, loop := range poisonLoops {
		got[loop] = counterValue(t, m.poison.WithLabelValues(loop))
	}
	want := map[string]float64{"relay": 2, "consumer": 1, "event_relay": 3, "event_consumer": 4, "persister": 5, "expire": 0, "settle": 0, "return": 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("seckill_poison_rows_total (-want +got):\n%s", diff)
	}
}
