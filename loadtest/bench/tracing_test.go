package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// exportRequest is an OTLP export of spans spans: two resources, the second with two scopes.
func exportRequest(tb testing.TB) *coltrace.ExportTraceServiceRequest {
	tb.Helper()
	span := func() *tracepb.Span {
		return &tracepb.Span{Name: "seckill.deduct", TraceId: make([]byte, 16), SpanId: make([]byte, 8)}
	}
	return &coltrace.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{
		{ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{span(), span()}}}},
		{ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{span()}}, {Spans: []*tracepb.Span{span(), span()}}}},
	}}
}

func TestCountSpans(t *testing.T) {
	req := exportRequest(t)
	pb, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	js, err := protojson.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(pb)
	zw.Close()
	for _, tc := range []struct {
		name, contentType, encoding string
		body                        []byte
		want                        int
		wantErr                     bool
	}{
		{"protobuf", "application/x-protobuf", "", pb, 5, false},
		{"gzip", "application/x-protobuf", "gzip", gz.Bytes(), 5, false},
		{"json", "application/json; charset=utf-8", "", js, 5, false},
		{"empty export", "application/x-protobuf", "", nil, 0, false},
		{"not protobuf", "application/x-protobuf", "", []byte("\xff\xff\xff"), 0, true},
		{"gzip that is not", "application/x-protobuf", "gzip", pb, 0, true},
		{"other encoding", "application/x-protobuf", "br", pb, 0, true},
		{"other type", "text/plain", "", pb, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := countSpans(tc.body, tc.contentType, tc.encoding)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("countSpans = %d, %v; want %d, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// TestTraceSink: the sink answers an export 200 and counts it, refuses what it cannot read, and
// answers nothing but POST /v1/traces.
func TestTraceSink(t *testing.T) {
	s, err := startTraceSink()
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	pb, err := proto.Marshal(exportRequest(t))
	if err != nil {
		t.Fatal(err)
	}
	post := func(path, contentType string, body []byte) int {
		t.Helper()
		res, err := http.Post(s.URL+path, contentType, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	for i := range 2 {
		if code := post("/v1/traces", "application/x-protobuf", pb); code != http.StatusOK {
			t.Fatalf("export %d: %d, want 200", i+1, code)
		}
	}
	before := s.snapshot()
	if code := post("/v1/traces", "application/x-protobuf", []byte("\xff\xff\xff")); code != http.StatusBadRequest {
		t.Errorf("garbage: %d, want 400", code)
	}
	if code := post("/v1/metrics", "application/x-protobuf", pb); code != http.StatusNotFound {
		t.Errorf("/v1/metrics: %d, want 404", code)
	}
	want := sinkCounts{Exports: 2, Spans: 10, Bytes: int64(2*len(pb) + 3), Refused: 1}
	if diff := cmp.Diff(want, s.snapshot()); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(sinkCounts{Bytes: 3, Refused: 1}, s.snapshot().sub(before)); diff != "" {
		t.Errorf("counts since the snapshot (-want +got):\n%s", diff)
	}
}

// tracingPair is the off and on accept rows of one strategy, workers and round, R of that round
// being 1000 (so a ratio is the figure ÷ 1000).
func tracingPair(round int, what string, workers int, off, on float64, spans int) []Row {
	return []Row{
		{Round: round, Kind: kindAccept, What: what, Workers: workers, Tracing: tracingOffLabel, Figure: off, Accepted: int(off) * 5, Config: "batch default (128) · 64 workers · 3 replicas"},
		{Round: round, Kind: kindAccept, What: what, Workers: workers, Tracing: tracingOnLabel, Figure: on, Accepted: int(on) * 5,
			Traces: &sinkCounts{Exports: 2, Spans: spans}, Config: "batch default (128) · tracing on (sample 0.01) · 64 workers · 3 replicas"},
	}
}

func TestTracingRows(t *testing.T) {
	rows := []Row{
		{Round: 1, Kind: kindR, Figure: 1000},
		{Round: 2, Kind: kindR, Figure: 1000},
		{Round: 3, Kind: kindR, Figure: 1000},
		// Unpaired rows (another worker count, no tracing label) are not in the comparison.
		{Round: 1, Kind: kindAccept, What: "accept mysql", Workers: 32, Figure: 3000},
	}
	rows = append(rows, tracingPair(1, "accept mysql", 64, 4000, 3800, 100)...) // 0.95
	rows = append(rows, tracingPair(1, "accept redis", 64, 5000, 5000, 120)...) // 1
	rows = append(rows, tracingPair(2, "accept mysql", 64, 4000, 4200, 110)...) // 1.05
	rows = append(rows, tracingPair(2, "accept redis", 64, 5000, 4000, 90)...)  // 0.8
	rows = append(rows, tracingPair(3, "accept mysql", 64, 5000, 5000, 90)...)  // 1
	// Round 3 of redis: the on phase only (the run aborted): its spans count, no ratio.
	rows = append(rows, tracingPair(3, "accept redis", 64, 5000, 4500, 80)[1])
	// The replicas' CPU per accepted purchase, for mysql's pairs (redis's were not measured):
	// on ÷ off 1.02, 1.10, 0.98 by round.
	for i, cpu := range map[int][2]float64{1: {100, 102}, 2: {100, 110}, 3: {120, 117.6}} {
		for j := range rows {
			if rows[j].What == "accept mysql" && rows[j].Round == i && rows[j].Tracing != "" {
				rows[j].ReplicaCPUUS = cpu[0]
				if rows[j].Tracing == tracingOnLabel {
					rows[j].ReplicaCPUUS = cpu[1]
				}
			}
		}
	}
	computeRatios(rows)
	got := tracingRows(rows)
	want := []TracingRow{
		{What: "accept mysql", Workers: 64, Rounds: 3, Off: 4, On: 4.2, OnOff: 1, Min: 0.95, Max: 1.05, Exports: 6, Spans: 300, Accepted: 5 * (3800 + 4200 + 5000),
			CPUOff: 100, CPUOn: 110, CPUOnOff: 1.02, CPUMin: 0.98, CPUMax: 1.1, CPURounds: 3},
		{What: "accept redis", Workers: 64, Rounds: 2, Off: 5, On: 4.5, OnOff: 0.9, Min: 0.8, Max: 1, Exports: 6, Spans: 290, Accepted: 5 * (5000 + 4000 + 4500)},
	}
	approx := cmp.Comparer(func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 })
	if diff := cmp.Diff(want, got, approx); diff != "" {
		t.Fatalf("tracing rows (-want +got):\n%s", diff)
	}
	if !got[0].Within() || got[1].Within() {
		t.Errorf("within 5 %%: mysql (1.00) %v, redis (0.90) %v; want true, false", got[0].Within(), got[1].Within())
	}
	if rows := tracingRows([]Row{{Kind: kindAccept, What: "accept mysql", Workers: 64, Figure: 1}}); len(rows) != 0 {
		t.Errorf("a run without the tracing configuration: %v, want none", rows)
	}

	rep := &Report{Settings: Settings{Rounds: 3, Tracing: &TracingSettings{Sample: "0.01", Workers: []int{64}, Sink: "http://127.0.0.1:4999",
		Received: sinkCounts{Exports: 14, Spans: 620, Bytes: 123456}}}, Rows: rows, Tracing: got}
	md := markdown(rep)
	for _, want := range []string{
		"SECKILL_TRACING_SAMPLE=0.01, exporting over OTLP/HTTP to the bench's own sink http://127.0.0.1:4999",
		"| accept mysql | 64 | 3 | 4.00 of R | 4.20 of R | 1.000 | 0.950–1.050 | yes | 100 · 110 | 1.020 (0.980–1.100) | 6 · 300 | 4.6 |",
		"| accept redis | 64 | 2 | 5.00 of R | 4.50 of R | 0.900 | 0.800–1.000 | no | — | — | 6 · 290 | 4.3 |",
		"The sink received 14 exports, 620 spans, 123,456 bytes over the run.",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the Markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(markdown(sampleReport()), "Tracing: each strategy") {
		t.Error("a report without the tracing configuration has a tracing section")
	}
}

func TestTracingOptions(t *testing.T) {
	o, err := parseOptions(nil, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !o.tracing || !o.tracingOn() || o.tracingSample != "0.01" || !cmp.Equal(o.tracingWorkers, []int{64}) {
		t.Errorf("tracing defaults: on %v, sample %s, workers %v; want on, 0.01 (the app's default), [64]", o.tracing, o.tracingSample, o.tracingWorkers)
	}
	for _, tc := range []struct {
		args []string
		on   bool
	}{
		{[]string{"-tracing=false"}, false},
		{[]string{"-phases", "gin,r"}, false},                      // no accept phases
		{[]string{"-targets", "http://127.0.0.1:8081"}, false},     // replicas it did not start
		{[]string{"-workers", "8", "-tracing-workers", "8"}, true}, // one of -workers
	} {
		o, err := parseOptions(tc.args, noEnv, io.Discard)
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if o.tracingOn() != tc.on {
			t.Errorf("%q: tracing configuration %v, want %v", tc.args, o.tracingOn(), tc.on)
		}
	}
	for _, args := range [][]string{
		{"-workers", "32", "-tracing-workers", "64"}, // not one of -workers
		{"-tracing-workers", "0"},
		{"-tracing-sample", "0"},
		{"-tracing-sample", "2"},
	} {
		if _, err := parseOptions(args, noEnv, io.Discard); err == nil {
			t.Errorf("%q: accepted, want an error", args)
		}
	}
	// With -tracing=false, a bad -tracing-workers is no matter.
	if _, err := parseOptions([]string{"-tracing=false", "-workers", "32", "-tracing-workers", "64"}, noEnv, io.Discard); err != nil {
		t.Errorf("-tracing=false with -tracing-workers 64: %v", err)
	}
}

func TestTracingReplicaEnv(t *testing.T) {
	base := []string{"PATH=/bin", "SECKILL_TRACING=otlp", "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318"}
	o, err := parseOptions(nil, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	b := &bench{o: o}
	sink := &traceSink{URL: "http://127.0.0.1:4999"}
	on := envMap(b.replicaEnv(base, batchDefault, sink)(0, "a", "p", nil))
	for k, v := range map[string]string{"SECKILL_TRACING": "otlp", "SECKILL_TRACING_SAMPLE": "0.01", "OTEL_EXPORTER_OTLP_ENDPOINT": sink.URL, "SECKILL_INSTANCE_ID": "bench-tracing-1"} {
		if on[k] != v {
			t.Errorf("tracing on: %s = %q, want %q", k, on[k], v)
		}
	}
	// The configuration it is compared with is off, whatever the caller's environment says.
	if off := envMap(b.replicaEnv(base, batchDefault, nil)(0, "a", "p", nil)); off["SECKILL_TRACING"] != "off" || off["SECKILL_INSTANCE_ID"] != "bench-1" {
		t.Errorf("tracing off: SECKILL_TRACING %q, instance %q; want off, bench-1", off["SECKILL_TRACING"], off["SECKILL_INSTANCE_ID"])
	}
	// Without the tracing configuration the environment is left as the caller has it.
	b.o.tracing = false
	if off := envMap(b.replicaEnv(base, batchDefault, nil)(0, "a", "p", nil)); off["SECKILL_TRACING"] != "otlp" {
		t.Errorf("-tracing=false: SECKILL_TRACING %q, want the caller's otlp", off["SECKILL_TRACING"])
	}
}

// TestPairOrder: unpaired, the off side alone; paired, off then on in odd rounds, on then off in
// even ones.
func TestPairOrder(t *testing.T) {
	off := acceptSide{targets: []string{"off"}, tracing: tracingOffLabel}
	on := &acceptSide{targets: []string{"on"}, tracing: tracingOnLabel}
	names := func(sides []acceptSide) string {
		var out []string
		for _, s := range sides {
			out = append(out, s.targets[0])
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		on     *acceptSide
		paired bool
		round  int
		want   string
	}{
		{nil, false, 1, "off"},
		{on, false, 1, "off"},
		{on, true, 1, "off,on"},
		{on, true, 2, "on,off"},
		{on, true, 3, "off,on"},
	} {
		if got := names(pairOrder(off, tc.on, tc.paired, tc.round)); got != tc.want {
			t.Errorf("pairOrder(paired %v, round %d) = %s, want %s", tc.paired, tc.round, got, tc.want)
		}
	}
}

// TestAttributeTraces: each tracing-on row gets what the sink received from its mark to the next
// mark, the last one to the final counts; other rows get nothing.
func TestAttributeTraces(t *testing.T) {
	at := func(exports, spans int) sinkCounts {
		return sinkCounts{Exports: exports, Spans: spans, Bytes: int64(100 * spans)}
	}
	rows := []Row{
		{What: "accept mysql", Tracing: tracingOffLabel},
		{What: "accept mysql", Tracing: tracingOnLabel},
		{What: "accept redis", Tracing: tracingOffLabel}, // the on phase's batches arrive meanwhile
		{What: "accept redis", Tracing: tracingOnLabel},
		{What: "accept mysql", Workers: 32},
		{What: "accept redis", Tracing: tracingOnLabel},
	}
	marks := []traceMark{{row: 1, at: at(0, 0)}, {row: 3, at: at(3, 40)}, {row: 5, at: at(5, 70)}}
	attributeTraces(rows, marks, sinkCounts{Exports: 9, Spans: 100, Bytes: 10_000})
	var got []*sinkCounts
	for _, r := range rows {
		got = append(got, r.Traces)
	}
	want := []*sinkCounts{nil, {Exports: 3, Spans: 40, Bytes: 4000}, nil, {Exports: 2, Spans: 30, Bytes: 3000}, nil, {Exports: 4, Spans: 30, Bytes: 3000}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("traces per row (-want +got):\n%s", diff)
	}
	attributeTraces(nil, nil, sinkCounts{}) // no rows: nothing to do, no panic
}
