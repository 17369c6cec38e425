package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	mathrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"

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
	if n := l.tracked(); n != 1 {
		t.Fatalf("after a sweep %d users are tracked, want 1 (only the active one)", n)
	}
	var off *userLimiter = newUserLimiter(0, 0)
	if !off.Allow("x", now) {
		t.Fatal("a disabled limiter refused")
	}
}

// unmarshalStrictTwoPass is the decoder unmarshalStrict replaced: a pass into a map to name
// unknown fields exactly, then a pass into dst. FuzzUnmarshalStrict holds the one-pass decoder
// to its answers. It returns every unknown field, since which one it reported depended on map
// order.
func unmarshalStrictTwoPass(data []byte, dst any) (unknown []string, err error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, &sale.ValidationError{Reason: "the request body must be a JSON object"}
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return nil, describeJSONError(err)
	}
	if fields == nil {
		return nil, &sale.ValidationError{Reason: "the request body must be a JSON object"}
	}
	known := jsonFields(dst)
	for name := range fields {
		if !slices.Contains(known, name) {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		return unknown, &sale.ValidationError{Field: unknown[0], Reason: "unknown field"}
	}
	if err := json.Unmarshal(data, dst); err != nil {
		return nil, describeJSONError(err)
	}
	return nil, nil
}

// FuzzUnmarshalStrict: the one-pass decoder gives the two-pass decoder's answer (the same
// error, or the same decoded value) for any input, into a small and a larger DTO.
func FuzzUnmarshalStrict(f *testing.F) {
	for _, seed := range []string{
		`{"user_id":"alice","quantity":1}`, `{"user_id":"a","USER_ID":"b"}`, ` {"user\u005fid" : "x"} `,
		`{"user_id":"a","x":{"y":[1,"}",{"z":null}]},"q":true}`, `{}`, `null`, `[]`, `"x"`, `1`, `{"a":1} {}`,
		`{"quantity":1e99}`, `{"user_id":7,"bogus":1}`, `{"name":"n","stock":3,"price_cents":"x"}`,
		"{\"\xff\":1}", `{"user_id":"\"}\\"}`, `{"sale_starts_at":null,"per_user_limit":-1}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		check := func(newDst, oldDst any) {
			t.Helper()
			got := unmarshalStrict(data, newDst)
			unknown, want := unmarshalStrictTwoPass(data, oldDst)
			var gotV *sale.ValidationError
			switch {
			case len(unknown) > 0:
				if !errors.As(got, &gotV) || gotV.Reason != "unknown field" || !slices.Contains(unknown, gotV.Field) {
					t.Fatalf("%q: got %v, want an unknown field among %q", data, got, unknown)
				}
			case (got == nil) != (want == nil) || got != nil && got.Error() != want.Error():
				t.Fatalf("%q: got %v, want %v", data, got, want)
			case got == nil && !reflect.DeepEqual(newDst, oldDst):
				t.Fatalf("%q: decoded %+v, want %+v", data, newDst, oldDst)
			}
		}
		check(new(purchaseJSON), new(purchaseJSON))
		check(new(newProductJSON), new(newProductJSON))
	})
}

// TestUserLimiterMatchesRate: the buckets answer as a rate.Limiter per user would, request for
// request, over random traffic (clock steps back included).
func TestUserLimiterMatchesRate(t *testing.T) {
	rnd := mathrand.New(mathrand.NewPCG(1, 2))
	for _, lim := range []struct {
		perSecond float64
		burst     int
	}{{5, 10}, {2, 2}, {0.5, 1}, {1000, 3}, {3, 0}} {
		l := newUserLimiter(lim.perSecond, lim.burst)
		ref := map[string]*rate.Limiter{}
		now := time.Unix(1_800_000_000, 0)
		for i := range 20000 {
			switch r := rnd.IntN(100); {
			case r < 2:
				now = now.Add(-time.Duration(rnd.IntN(1000)) * time.Millisecond)
			case r < 60:
				now = now.Add(time.Duration(rnd.IntN(400)) * time.Millisecond)
			}
			user := "u" + strconv.Itoa(rnd.IntN(5))
			if ref[user] == nil {
				ref[user] = rate.NewLimiter(rate.Limit(lim.perSecond), max(lim.burst, 1))
			}
			if got, want := l.Allow(user, now), ref[user].AllowN(now, 1); got != want {
				t.Fatalf("rate %v burst %d, request %d of %s at %v: Allow = %v, rate.Limiter says %v",
					lim.perSecond, lim.burst, i, user, now, got, want)
			}
		}
	}
}
