package turnstile_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/waitroom/challenge"
	"github.com/seckill-go/seckill-go/internal/waitroom/challenge/turnstile"
	"github.com/seckill-go/seckill-go/internal/waitroom/challenge/turnstile/turnstiletest"
)

// TestVerify: against the stand-in that answers as Cloudflare documents its test secret keys:
// the passing key passes, the failing and the spent ones refuse the token, a key siteverify
// does not know (ours misconfigured) is unavailability, not the visitor's fault; the visitor's
// address goes with the token.
func TestVerify(t *testing.T) {
	cf := turnstiletest.New()
	defer cf.Close()
	ctx := context.Background()
	for _, tc := range []struct {
		name, secret, token string
		want                error
	}{
		{"the passing test key", turnstiletest.SecretPass, turnstiletest.DummyToken, nil},
		{"the failing test key", turnstiletest.SecretFail, turnstiletest.DummyToken, challenge.ErrInvalid},
		{"the spent test key", turnstiletest.SecretSpent, turnstiletest.DummyToken, challenge.ErrInvalid},
		{"a secret siteverify refuses", "0x4AAAAAAAnotourstestkeyAAAAAAAAAA", turnstiletest.DummyToken, challenge.ErrUnavailable},
		{"no token", turnstiletest.SecretPass, "", challenge.ErrRequired},
		{"a token too long", turnstiletest.SecretPass, strings.Repeat("x", turnstile.MaxTokenLen+1), challenge.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := turnstile.New(tc.secret, turnstile.Options{URL: cf.URL})
			if err != nil {
				t.Fatal(err)
			}
			if err := v.Verify(ctx, tc.token, "198.51.100.7"); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Errorf("Verify: %v, want %v", err, tc.want)
			}
		})
	}
	reqs := cf.Requests()
	if len(reqs) != 4 {
		t.Fatalf("siteverify was asked %d times, want 4 (never for a missing or oversized token)", len(reqs))
	}
	if r := reqs[0]; r.Secret != turnstiletest.SecretPass || r.Response != turnstiletest.DummyToken || r.RemoteIP != "198.51.100.7" {
		t.Errorf("siteverify got %+v", r)
	}
}

// TestVerifyUnavailable: siteverify down, slow, answering 5xx or garbage is ErrUnavailable: a
// join is never let through unchecked.
func TestVerifyUnavailable(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(2 * time.Second):
		}
	}))
	defer slow.Close()
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
	}))
	defer broken.Close()
	garbage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("<html>")) }))
	defer garbage.Close()
	for name, url := range map[string]string{"down": deadURL, "slow": slow.URL, "5xx": broken.URL, "not JSON": garbage.URL} {
		t.Run(name, func(t *testing.T) {
			v, err := turnstile.New(turnstiletest.SecretPass, turnstile.Options{URL: url, Timeout: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if err := v.Verify(context.Background(), turnstiletest.DummyToken, ""); !errors.Is(err, challenge.ErrUnavailable) {
				t.Errorf("Verify: %v, want %v", err, challenge.ErrUnavailable)
			}
		})
	}
}

func TestNewRefuses(t *testing.T) {
	if _, err := turnstile.New("", turnstile.Options{}); err == nil {
		t.Error("no secret accepted")
	}
	if _, err := turnstile.New(turnstiletest.SecretPass, turnstile.Options{URL: "ftp://example.com/x"}); err == nil {
		t.Error("a non-HTTP URL accepted")
	}
}
