package httpapi

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/sale"
)

func TestDecodePurchase(t *testing.T) {
	for _, tc := range []struct {
		body     string
		wantErr  string // substring; "" means it decodes and validates
		wantQty  int
		wantUser string
	}{
		{`{"user_id":"alice","quantity":2}`, "", 2, "alice"},
		{`{"user_id":"alice"}`, "", 1, "alice"},
		{` {"user_id":"bob"} `, "", 1, "bob"},
		{``, "must be a JSON object", 0, ""},
		{`null`, "must be a JSON object", 0, ""},
		{`[]`, "must be a JSON object", 0, ""},
		{`{"user_id":"a"} {"user_id":"b"}`, "malformed JSON", 0, ""},
		{`{"user_id":`, "malformed JSON", 0, ""},
		{`{"user_id":"a","USER_ID":"b"}`, "USER_ID: unknown field", 0, ""},
		{`{"user_id":7}`, "user_id: must be a JSON string", 0, ""},
		{`{"user_id":"a","quantity":1e99}`, "quantity: must be a JSON integer", 0, ""},
		{`{"user_id":"a","quantity":0}`, "quantity: must be an integer between", 0, ""},
	} {
		t.Run(tc.body, func(t *testing.T) {
			var body purchaseJSON
			err := unmarshalStrict([]byte(tc.body), &body)
			var req sale.PurchaseRequest
			if err == nil {
				req = parsePurchase(1, body, "")
				err = req.Validate()
			}
			if tc.wantErr == "" {
				if err != nil || req.Quantity != tc.wantQty || req.UserID != tc.wantUser {
					t.Fatalf("got %+v, %v; want user %q qty %d", req, err, tc.wantUser, tc.wantQty)
				}
				return
			}
			if err == nil || !errors.Is(err, sale.ErrInvalid) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error = %v, want an invalid-request error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestDecodeBodyTooLarge(t *testing.T) {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "/", strings.NewReader(`{"user_id":"`+strings.Repeat("a", 100)+`"}`))
	limited := http.MaxBytesReader(rec, req.Body, 32)
	var body purchaseJSON
	if err := decodeJSON(limited, &body); !errors.Is(err, errBodyTooLarge) {
		t.Fatalf("decodeJSON = %v, want errBodyTooLarge", err)
	}
}

// FuzzPurchaseBody: no body, however broken, makes the decoder panic, and whatever passes
// validation is a well-formed purchase.
func FuzzPurchaseBody(f *testing.F) {
	for _, seed := range []string{`{"user_id":"alice","quantity":1}`, `{"user_id":"\u0000"}`, `{"quantity":-1}`, `[`, `{"a":{"b":[]}}`} {
		f.Add([]byte(seed), "key")
	}
	f.Fuzz(func(t *testing.T, data []byte, key string) {
		var body purchaseJSON
		if err := unmarshalStrict(data, &body); err != nil {
			if !errors.Is(err, sale.ErrInvalid) {
				t.Fatalf("decode error %v is not an invalid-request error", err)
			}
			return
		}
		req := parsePurchase(1, body, key)
		if err := req.Validate(); err != nil {
			return
		}
		if req.Quantity < 1 || req.UserID == "" || len(req.UserID) > sale.MaxUserIDLen || len(req.IdempotencyKey) > sale.MaxIdempotencyKeyLen {
			t.Fatalf("invalid request passed validation: %+v", req)
		}
	})
}

func TestUserLimiter(t *testing.T) {
	l := newUserLimiter(2, 2)
	now := time.Unix(1_800_000_000, 0)
	got := []bool{l.Allow("a", now), l.Allow("a", now), l.Allow("a", now), l.Allow("b", now), l.Allow("a", now.Add(500*time.Millisecond))}
	want := []bool{true, true, false, true, true}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Allow sequence = %v, want %v", got, want)
		}
	}
	l.Allow("c", now.Add(2*limiterSweepEvery))
	if n := len(l.users); n != 1 {
		t.Fatalf("after a sweep %d users are tracked, want 1 (only the active one)", n)
	}
	var off *userLimiter = newUserLimiter(0, 0)
	if !off.Allow("x", now) {
		t.Fatal("a disabled limiter refused")
	}
}
