package viewers

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func TestLowsKeepOnlyNewLows(t *testing.T) {
	var l Lows
	for i, stock := range []int{10, 10, 8, 9, 8, 5, 0, 0} {
		l.Saw(at(i*100), stock)
	}
	want := Lows{{at(0), 10}, {at(200), 8}, {at(500), 5}, {at(600), 0}}
	if diff := cmp.Diff(want, l); diff != "" {
		t.Fatalf("lows (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		stock int
		want  time.Time
		ok    bool
	}{
		{10, at(0), true}, {9, at(200), true}, {8, at(200), true}, {7, at(500), true}, {1, at(600), true}, {0, at(600), true}, {-1, time.Time{}, false},
	} {
		if got, ok := l.FirstAtOrBelow(tc.stock); !got.Equal(tc.want) || ok != tc.ok {
			t.Errorf("FirstAtOrBelow(%d) = %v, %v; want %v, %v", tc.stock, got, ok, tc.want, tc.ok)
		}
	}
}

// TestLags works one sale by hand: 4 units, sold (202s arriving) at 100, 200, 300 and 400 ms.
func TestLags(t *testing.T) {
	sold := []time.Time{at(100), at(200), at(300), at(400)}
	viewers := []Lows{
		// read 4 at the start, 2 at 250 (units 1 and 2: 150 and 50 ms late), 0 at 900 (units 3
		// and 4: 600 and 500 ms late)
		{{at(0), 4}, {at(250), 2}, {at(900), 0}},
		// read 3 before the first 202 arrived (early: 0), then nothing more: units 2-4 missed
		{{at(0), 4}, {at(90), 3}},
	}
	got := Lags(4, sold, viewers)
	if got.Units != 4 || got.Samples != 8 || got.Missed != 3 || got.Early != 1 {
		t.Errorf("units %d, samples %d, missed %d, early %d; want 4, 8, 3, 1", got.Units, got.Samples, got.Missed, got.Early)
	}
	// 0, 50, 150, 500, 600 ms: p50 at index 2
	if l := got.Latency; l.Count != 5 || l.P50 != 150 || l.Max != 600 {
		t.Errorf("latency %+v; want 5 samples, p50 150 ms, max 600 ms", l)
	}
}

// TestLagsOversold: units sold beyond the stock (the unsafe control) are not timed.
func TestLagsOversold(t *testing.T) {
	sold := []time.Time{at(10), at(20), at(30)}
	got := Lags(2, sold, []Lows{{{at(0), 2}, {at(50), 0}}})
	if got.Units != 2 || got.Missed != 0 || got.Latency.Max != 40 {
		t.Errorf("%+v: want 2 units timed, none missed, max 40 ms", got)
	}
}

func TestSampleUnits(t *testing.T) {
	for _, tc := range []struct {
		units, n int
		want     []int
	}{
		{0, 5, nil},
		{3, 5, []int{1, 2, 3}},
		{10, 5, []int{2, 4, 6, 8, 10}},
		{7, 3, []int{3, 5, 7}},
	} {
		if diff := cmp.Diff(tc.want, sampleUnits(tc.units, tc.n)); diff != "" {
			t.Errorf("sampleUnits(%d, %d) (-want +got):\n%s", tc.units, tc.n, diff)
		}
	}
	if ks := sampleUnits(100_000, LagSamples); len(ks) != LagSamples || ks[len(ks)-1] != 100_000 {
		t.Errorf("sampleUnits(100000): %d units ending with %d", len(ks), ks[len(ks)-1])
	}
}

func TestProductFigures(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       figures
		ok         bool
	}{
		{"a product", `{"id":7,"name":"x","stock":3,"initial_stock":5,"state":"on_sale"}`, figures{3, "on_sale"}, true},
		{"another product", `{"id":8,"stock":3,"state":"on_sale"}`, figures{}, false},
		{"viewer stats: no id, no state", `{"initial_stock":5,"stock":0,"sold_units":5}`, figures{0, ""}, true},
		{"an event", `{"product":{"id":7,"stock":0,"initial_stock":5,"state":"sold_out"},"stats":{"stock":0}}`, figures{0, "sold_out"}, true},
		{"a snapshot", `{"items":[{"product":{"id":6,"stock":9,"state":"on_sale"}},{"product":{"id":7,"stock":2,"state":"on_sale"},"stats":{"stock":2}}]}`, figures{2, "on_sale"}, true},
		{"a snapshot without it", `{"items":[{"product":{"id":6,"stock":9}}]}`, figures{}, false},
		{"the list", `{"products":[{"id":1,"stock":1},{"id":7,"stock":4,"state":"on_sale"}]}`, figures{4, "on_sale"}, true},
		{"the list without it (unlisted)", `{"products":[{"id":1,"stock":1}]}`, figures{}, false},
		{"an error", `{"error":{"code":"not_found","message":"x"}}`, figures{}, false},
		{"not JSON", `<html>`, figures{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := productFigures([]byte(tc.body), 7)
			if got != tc.want || ok != tc.ok {
				t.Errorf("got %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestEventFigures: the scan reads what encoding/json reads, and hands it the shapes it cannot.
func TestEventFigures(t *testing.T) {
	for _, body := range []string{
		string(eventData),
		`{"product":{"id":7,"stock":0,"state":"sold_out"},"stats":{"stock":0}}`,
		`{"product":{"id":7,"stock":-3,"state":"sold_out"}}`,
		`{"stats":{"stock":2},"product":{"state":"on_sale","stock":2,"id":7}}`,
		`{"product":{"id":8,"stock":2,"state":"on_sale"}}`,
		`{"product":{"id":7,"name":"a \"stock\": 9 {x}","stock":2,"state":"on_sale"}}`,
		`{"product":{"id":7,"name":"x","stock":2,"state":"on\u005fsale"}}`,
		`{"product":{"id":7,"stock":2,"tags":["a"],"state":"on_sale"}}`,
		`{"product":{"id":7,"admission":{"mode":"queue","stock":9},"stock":2,"state":"on_sale"}}`,
		`{"product":{"id":7,"admission":{"mode":"q\"}"},"stock":2,"state":"on_sale"}}`,
		`{"product":{"id":7,"admission":{"mode":["}"]},"stock":2,"state":"on_sale"}}`,
		`{"product":{"id":7,"admission":{"mode":"open"}},"stock":2}`,
		`{"product":{"id":7,"admission":{"mode":"open"},"stock":2,"state":"on_sale"`,
		`{"product":{"id":7,"admission":{"mode":"open","stock":2,"state":"on_sale"}}`,
		`{"product": { "id" : 7 , "stock" : 2 , "state" : "on_sale" } }`,
		`{"product":{"id":7,"stock":2,"state":"on_sale",}}`,
		`{"product":{"id":7,"stock":2.5,"state":"on_sale"}}`,
		`{"product":{"id":7,"stock":null,"state":"on_sale"}}`,
		`{"items":[{"product":{"id":7,"stock":5,"state":"on_sale"}}]}`,
		`{"product":{"id":7,"stock":"x"}}`,
		`{"product":{"id":7`,
		`not json`,
	} {
		got, ok := eventFigures([]byte(body), 7)
		want, wantOK := productFigures([]byte(body), 7)
		if got != want || ok != wantOK {
			t.Errorf("%s: scan %+v %v, encoding/json %+v %v", body, got, ok, want, wantOK)
		}
	}
}

func TestSoldOut(t *testing.T) {
	for _, tc := range []struct {
		f    figures
		want bool
	}{
		{figures{0, "sold_out"}, true},
		{figures{0, ""}, true},         // a server without states, or stats
		{figures{0, "ended"}, false},   // over, not sold out
		{figures{3, "on_sale"}, false}, //
		{figures{2, ""}, false},
	} {
		if got := tc.f.soldOut(); got != tc.want {
			t.Errorf("%+v: soldOut %v, want %v", tc.f, got, tc.want)
		}
	}
}

// TestEventFiguresScansTheContractsEvent: the event as the server shapes it — a product with a
// nested admission object among its fields — is read by the scan, not handed to encoding/json,
// which costs a viewer twenty times more (BenchmarkProductFigures).
func TestEventFiguresScansTheContractsEvent(t *testing.T) {
	f, ok, done := scanProductEvent(eventData, 7)
	if !done || !ok || f != (figures{stock: 4321, state: "on_sale"}) {
		t.Fatalf("scan: %+v ok=%v done=%v, want stock 4321 on_sale read by the scan", f, ok, done)
	}
}

// eventData is an event of the read side as the contract shapes it.
var eventData = []byte(`{"product":{"id":7,"name":"loadtest · mysql · 5000 stream viewers","price_cents":100,"stock":4321,"initial_stock":10000,"strategy":"mysql",` +
	`"sale_starts_at":"2026-11-28T08:00:00Z","sale_ends_at":"2026-11-28T09:00:00Z","per_user_limit":1,"listed":false,"state":"on_sale","admission":{"mode":"open"}},` +
	`"stats":{"initial_stock":10000,"stock":4321,"sold_units":5679,"requests_per_sec":5123.5,"accepted_per_sec":2345.2,"rate_window_sec":10,` +
	`"rates_available":true,"per_second":{"start":1764316800,"requests":[5000,5100,5200,5300,5400,5500,5600,5700,5800,5900],"accepted":[2000,2100,2200,2300,2400,2500,2600,2700,2800,2900]}}}`)

// BenchmarkEventFigures is a viewer's cost of one event: thousands of streams read several a
// second each, on the machine the replicas run on.
func BenchmarkEventFigures(b *testing.B) {
	for b.Loop() {
		if _, ok := eventFigures(eventData, 7); !ok {
			b.Fatal("no figures")
		}
	}
}

// BenchmarkProductFigures is encoding/json's cost of the same.
func BenchmarkProductFigures(b *testing.B) {
	for b.Loop() {
		if _, ok := productFigures(eventData, 7); !ok {
			b.Fatal("no figures")
		}
	}
}
