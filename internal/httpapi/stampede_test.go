package httpapi

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/seckill-go/seckill-go/internal/board"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/stampede"
)

func TestStatsWithRates(t *testing.T) {
	rates := &board.Rates{
		Start:    time.Unix(1_800_000_000, 0),
		Requests: []int64{50, 10, 0, 7, 0, 0},
		Accepted: []int64{5, 1, 0, 1, 0, 0},
	}
	audit := statsJSON{InitialStock: 10, ratesJSON: ratesOf(rates)}
	viewer := viewerStatsOf(&board.Item{Product: sale.Product{InitialStock: 10, Stock: 4}, Rates: rates})
	ratesOut := `"requests_per_sec":3.4,"accepted_per_sec":0.4,"rate_window_sec":5,"rates_available":true,` +
		`"per_second":{"start":1800000000,"requests":[50,10,0,7,0,0],"accepted":[5,1,0,1,0,0]}`
	noRates := `"requests_per_sec":0,"accepted_per_sec":0,"rate_window_sec":5,"rates_available":false,"per_second":null`
	for _, tc := range []struct {
		name string
		v    any
		want string
	}{
		{"audit", audit, `{"initial_stock":10,"stock":0,"reserved":0,"orders_confirmed":0,"confirmed_units":0,"oversold":0,` +
			`"awaiting_payment_units":0,"paid_units":0,"expired_units":0,"cancelled_units":0,"returned_units":0,"refused_orders":0,` + ratesOut + `}`},
		{"audit without rates", statsJSON{ratesJSON: ratesOf(nil)}, `{"initial_stock":0,"stock":0,"reserved":0,"orders_confirmed":0,"confirmed_units":0,"oversold":0,` +
			`"awaiting_payment_units":0,"paid_units":0,"expired_units":0,"cancelled_units":0,"returned_units":0,"refused_orders":0,` + noRates + `}`},
		{"viewer", viewer, `{"initial_stock":10,"stock":4,"sold_units":6,` + ratesOut + `}`},
		{"viewer without rates", viewerStatsOf(&board.Item{Product: sale.Product{InitialStock: 3, Stock: 3}}), `{"initial_stock":3,"stock":3,"sold_units":0,` + noRates + `}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := json.Marshal(tc.v)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(data)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
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
