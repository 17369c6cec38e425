package yardstick

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
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
