package yardstick

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func TestBareGinHandler(t *testing.T) {
	srv := httptest.NewServer(BareGinHandler())
	defer srv.Close()
	for _, tc := range []struct {
		name, path, body string
		wantStatus       int
		wantBody         string
	}{
		{"a purchase is refused as sold out", "/api/v1/products/7/purchase", `{"user_id":"alice","quantity":1}`, 409, `{"error":{"code":"sold_out","message":"sold out"}}`},
		{"an unknown field is refused", "/api/v1/products/7/purchase", `{"user_id":"alice","quantity":1,"x":2}`, 400, ""},
		{"a bad id is refused", "/api/v1/products/x/purchase", `{"user_id":"alice","quantity":1}`, 400, ""},
		{"no body", "/api/v1/products/7/purchase", ``, 400, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := http.Post(srv.URL+tc.path, "application/json", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			body, _ := io.ReadAll(res.Body)
			if res.StatusCode != tc.wantStatus || (tc.wantBody != "" && string(body) != tc.wantBody) {
				t.Errorf("got %d %s, want %d %s", res.StatusCode, body, tc.wantStatus, tc.wantBody)
			}
		})
	}
}

func TestBareGinReadHandler(t *testing.T) {
	srv := httptest.NewServer(BareGinHandler())
	defer srv.Close()
	res, err := http.Get(srv.URL + "/api/v1/products/7")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || string(body) != ReadCeilingProduct || res.Header.Get("ETag") == "" || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		t.Errorf("got %d %v %s; want 200, the fixed product with an ETag", res.StatusCode, res.Header, body)
	}
	if res, err := http.Get(srv.URL + "/api/v1/products/x"); err != nil || res.StatusCode != 400 {
		t.Errorf("a bad id: %v %v, want 400", res, err)
	}
}

// TestBareGinProcess starts the ceiling as a child (this test binary, re-run: see TestMain),
// blasts it, and stops it by its pid.
func TestBareGinProcess(t *testing.T) {
	p, err := StartBareGin(context.Background(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	res, err := Blast{Targets: []string{p.URL}, ProductID: 1, Workers: 8, Requests: 500, RunID: "gin", IdempotencyKeys: true}.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Answers["409 sold_out"] != 500 {
		t.Errorf("answers %v, want 500 × 409 sold_out", res.Answers)
	}
	var answered atomic.Int64
	res, err = Blast{Targets: []string{p.URL}, ProductID: 1, Workers: 8, Requests: 300, RunID: "ginread", Read: true,
		OnAnswer: func(status int, sent, at time.Time) {
			if status == 200 && !at.Before(sent) {
				answered.Add(1)
			}
		}}.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Answers["200"] != 300 || answered.Load() != 300 {
		t.Errorf("reads: answers %v, %d seen by OnAnswer; want 300 × 200", res.Answers, answered.Load())
	}
	if err := p.Stop(); err != nil {
		t.Error(err)
	}
	if err := p.Stop(); err != nil {
		t.Errorf("a second Stop: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(p.Pid, 0) == nil && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond) // reaped by Wait, the pid is gone
	}
	if syscall.Kill(p.Pid, 0) == nil {
		t.Errorf("pid %d still runs after Stop", p.Pid)
	}
}
