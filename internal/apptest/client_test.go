package apptest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestAnswersHeldToTheContract: an answer the contract describes passes by either way of
// Client, and one it does not (a field it does not have) is an error by either.
func TestAnswersHeldToTheContract(t *testing.T) {
	for _, tt := range []struct {
		name, body string
		wantErr    bool
	}{
		{"the contract's", `{"status":"ok"}`, false},
		{"a field too many", `{"status":"ok","extra":1}`, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") != "Bearer tok" {
					t.Errorf("Authorization %q, want the token", r.Header.Get("Authorization"))
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(tt.body))
			}))
			defer srv.Close()
			c := Client{URL: srv.URL, Token: "tok"}

			rsp, err := c.API().HealthzWithResponse(context.Background())
			if (err != nil) != tt.wantErr {
				t.Errorf("API: %v, want an error: %v", err, tt.wantErr)
			}
			if err == nil && (rsp.JSON200 == nil || rsp.JSON200.Status != "ok") {
				t.Errorf("API: %d %s, want the decoded status", rsp.StatusCode(), rsp.Body)
			}
			if err != nil && !strings.Contains(err.Error(), "apitest") {
				t.Errorf("API: %v, want the contract's complaint", err)
			}

			r, err := c.Do(http.MethodGet, "/healthz", nil, nil)
			if (err != nil) != tt.wantErr || r.Str("status") != "ok" {
				t.Errorf("Do: %+v, %v; want an error: %v", r, err, tt.wantErr)
			}
		})
	}
}
