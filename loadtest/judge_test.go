package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSoldOutRate(t *testing.T) {
	start := time.Unix(1_800_000_000, 0)
	// One answer every 10 ms for 2 s, each taking 5 ms; the product sold out at 1 s.
	var answers []answer
	for i := range 200 {
		answers = append(answers, answer{sent: start.Add(time.Duration(i) * 10 * time.Millisecond), latency: 5 * time.Millisecond})
	}
	soldOut, end := start.Add(time.Second), start.Add(1995*time.Millisecond)
	// Answers at 1.005 s … 1.995 s: 100 of them in 0.995 s.
	if got, want := soldOutRate(answers, soldOut, end), 100/0.995; got < want-0.01 || got > want+0.01 {
		t.Errorf("soldOutRate = %.2f, want %.2f", got, want)
	}
	// A tail too short to be a rate: sold out with the last answers.
	if got := soldOutRate(answers, start.Add(1900*time.Millisecond), end); got != 0 {
		t.Errorf("soldOutRate of a 0.1 s tail = %.1f, want 0 (no rate)", got)
	}
	if got := soldOutRate(answers[:20], start, start.Add(time.Second)); got != 0 {
		t.Errorf("soldOutRate of 20 answers = %.1f, want 0 (too few)", got)
	}
}

func TestTimeline(t *testing.T) {
	start := time.Unix(1_800_000_000, 0)
	at := func(ms int, status int, replayed bool) answer {
		return answer{sent: start.Add(time.Duration(ms) * time.Millisecond), latency: 10 * time.Millisecond, status: status, replayed: replayed}
	}
	got := timeline([]answer{at(0, 202, false), at(50, 409, false), at(250, 202, true), at(260, 202, false)}, start)
	want := []Sample{
		{T: 0, Requests: 2, Accepted: 1, P50: 10, P99: 10},
		{T: 0.1},
		{T: 0.2, Requests: 2, Accepted: 1, P50: 10, P99: 10},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("timeline (-want +got):\n%s", diff)
	}
}

func TestPlanAttempts(t *testing.T) {
	o := &options{buyers: 2, attempts: 3, targets: []string{"http://a", "http://b"}}
	plan := planAttempts(o, "20261122-000000", "mysql")
	var got []string
	for _, a := range plan {
		got = append(got, a.target+" "+a.user+" "+a.key)
	}
	want := []string{
		"http://a lt20261122000000-mysql-0 lt20261122000000-mysql-0-k1",
		"http://a lt20261122000000-mysql-0 lt20261122000000-mysql-0-k1",
		"http://a lt20261122000000-mysql-0 lt20261122000000-mysql-0-k2",
		"http://b lt20261122000000-mysql-1 lt20261122000000-mysql-1-k1",
		"http://b lt20261122000000-mysql-1 lt20261122000000-mysql-1-k1",
		"http://b lt20261122000000-mysql-1 lt20261122000000-mysql-1-k2",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("plan (-want +got):\n%s", diff)
	}
}

func TestK6Accepted(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if n, err := k6Accepted(write("a.json", `{"metrics":{"seckill_accepted":{"type":"counter","values":{"count":42,"rate":3.5}}}}`)); err != nil || n != 42 {
		t.Fatalf("k6Accepted = %d, %v; want 42", n, err)
	}
	if n, err := k6Accepted(write("b.json", `{"metrics":{}}`)); err != nil || n != 0 {
		t.Fatalf("k6Accepted without the counter = %d, %v; want 0", n, err)
	}
	if _, err := k6Accepted(write("c.json", `not json`)); err == nil {
		t.Fatal("k6Accepted accepted a broken summary")
	}
}

// TestJudgeEndsWithTheRun: a run ended during the audit (Ctrl-C) ends the audit with the run's
// error, at once, instead of a verdict on a queue it did not wait for.
func TestJudgeEndsWithTheRun(t *testing.T) {
	db, err := openDB("root:@tcp(127.0.0.1:1)/none") // never reached: the context ends first
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	o := &options{stock: 1, buyers: 1, drainTimeout: time.Minute}
	start := time.Now()
	sr, err := judge(ctx, db, o, "mysql", 1, nil, nil, nil)
	if !errors.Is(err, context.Canceled) || sr != nil {
		t.Fatalf("judge after the run ended = %v, %v; want no report and context.Canceled", sr, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("judge took %s to notice the run ended", d)
	}
}
