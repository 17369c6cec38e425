package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

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

// TestRefusedOrderJSON: a refused order says why, as a code and in words that tell its buyer
// nothing will be charged, and has no payment window; an order of any other status carries
// neither field.
func TestRefusedOrderJSON(t *testing.T) {
	for _, tc := range []struct {
		o       sale.Order
		refusal string
		says    string // part of the message; "" for none
	}{
		{sale.Order{OrderID: "o1", Status: sale.StatusRefused, Refusal: sale.CodeSoldOut}, "sold_out", "last units"},
		{sale.Order{OrderID: "o2", Status: sale.StatusRefused, Refusal: sale.CodeLimitReached}, "limit_reached", "per-user limit"},
		{sale.Order{OrderID: "o3", Status: sale.StatusRefused}, "", "refused when it was recorded"},
		{sale.Order{OrderID: "o4", Status: sale.StatusConfirmed}, "", ""},
	} {
		b, err := json.Marshal(toOrderJSON(tc.o))
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		msg, _ := got["message"].(string)
		switch {
		case tc.says == "" && (got["message"] != nil || got["refusal"] != nil):
			t.Errorf("%s: %s; want no refusal and no message", tc.o.OrderID, b)
		case tc.says != "" && (!strings.Contains(msg, tc.says) || !strings.Contains(msg, "nothing will be charged")):
			t.Errorf("%s: message %q; want it to say %q and that nothing will be charged", tc.o.OrderID, msg, tc.says)
		case tc.refusal != "" && got["refusal"] != tc.refusal:
			t.Errorf("%s: refusal %v, want %s", tc.o.OrderID, got["refusal"], tc.refusal)
		case got["expires_at"] != nil:
			t.Errorf("%s: %s; want no payment window", tc.o.OrderID, b)
		}
	}
}
