package httpapi

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/seckill-go/seckill-go/internal/livestats"
	"github.com/seckill-go/seckill-go/internal/stampede"
)

func TestStatsWithRates(t *testing.T) {
	s := statsJSON{InitialStock: 10, RateWindowSec: 3}
	s.withRates(livestats.Rates{
		Start:    time.Unix(1_800_000_000, 0),
		Requests: []int64{50, 10, 0, 7},
		Accepted: []int64{5, 1, 0, 1},
	})
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"initial_stock":10,"stock":0,"reserved":0,"orders_confirmed":0,"confirmed_units":0,"oversold":0,` +
		`"awaiting_payment_units":0,"paid_units":0,"expired_units":0,"cancelled_units":0,"returned_units":0,` +
		`"requests_per_sec":5.7,"accepted_per_sec":0.7,"rate_window_sec":3,"rates_available":true,` +
		`"per_second":{"start":1800000000,"requests":[50,10,0,7],"accepted":[5,1,0,1]}}`
	if diff := cmp.Diff(want, string(data)); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}

	none, _ := json.Marshal(statsJSON{RateWindowSec: rateWindowSec})
	if got := string(none); got != `{"initial_stock":0,"stock":0,"reserved":0,"orders_confirmed":0,"confirmed_units":0,"oversold":0,`+
		`"awaiting_payment_units":0,"paid_units":0,"expired_units":0,"cancelled_units":0,"returned_units":0,`+
		`"requests_per_sec":0,"accepted_per_sec":0,"rate_window_sec":5,"rates_available":false,"per_second":null}` {
		t.Errorf("stats without rates: %s", got)
	}
}

func TestStampedeJSON(t *testing.T) {
	start := time.Date(2026, 11, 22, 10, 0, 0, 123_456_789, time.UTC)
	running := toStampedeJSON(stampede.Progress{ID: "0123456789ab", ProductID: 3, Buyers: 10, Sent: 4, Retries: 2, Accepted: 1, Running: true, StartedAt: start})
	data, _ := json.Marshal(running)
	want := `{"stampede_id":"0123456789ab","product_id":3,"buyers":10,"targets":[],"sent":4,"retries":2,"accepted":1,"sold_out":0,` +
		`"limit_reached":0,"rejected_other":0,"errors":0,"running":true,"started_at":"2026-11-22T10:00:00.123Z","finished_at":null}`
	if diff := cmp.Diff(want, string(data)); diff != "" {
		t.Errorf("running stampede (-want +got):\n%s", diff)
	}
	done := toStampedeJSON(stampede.Progress{ID: "x", Targets: []string{"http://a:1"}, StartedAt: start, FinishedAt: start.Add(1500 * time.Millisecond)})
	if done.FinishedAt == nil || *done.FinishedAt != "2026-11-22T10:00:01.623Z" || done.Running {
		t.Errorf("finished stampede: %+v", done)
	}
}
