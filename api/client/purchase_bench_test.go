package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/seckill-go/seckill-go/api/client"
)

// The purchase's cost to the load generators (the load test, the stampede), which share the
// machine's cores with the server they measure: one purchase sent and its answer read, by the
// hand-written path the generators had and by the generated client's ways. BenchmarkPurchase
// goes over loopback to a handler that answers a canned 202 (what a bare handler costs the
// client); BenchmarkPurchaseClientOnly answers in the transport, so that the figure is the
// client's work alone. docs/api.md gives the figures.

const cannedReceipt = `{"order_id":"o-0123456789abcdef","product_id":7,"quantity":1,"status":"pending","strategy":"redis-lua","user_id":"stampede-s1-42"}`

func cannedHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.Header().Set("Location", "/api/v1/orders/o-0123456789abcdef")
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, cannedReceipt)
	})
}

// cannedTransport answers every request with the canned 202 without a network.
type cannedTransport struct{}

func (cannedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	return &http.Response{
		StatusCode: http.StatusAccepted, Status: "202 Accepted", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{
			"Content-Type": {"application/json; charset=utf-8"},
			"Location":     {"/api/v1/orders/o-0123456789abcdef"},
		},
		Body:          io.NopCloser(bytes.NewReader([]byte(cannedReceipt))),
		ContentLength: int64(len(cannedReceipt)),
		Request:       r,
	}, nil
}

// purchaseFunc sends one purchase of product 7 by user and returns the status, the order id
// and the error code.
type purchaseFunc func(ctx context.Context, user string) (int, string, string, error)

// handWritten is the path the stampede and the load test had: a map marshalled, the URL
// written out, an anonymous struct decoded.
func handWritten(hc *http.Client, server string) purchaseFunc {
	return func(ctx context.Context, user string) (int, string, string, error) {
		body, _ := json.Marshal(map[string]any{"user_id": user, "quantity": 1})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, server+"/api/v1/products/"+strconv.FormatInt(7, 10)+"/purchase", bytes.NewReader(body))
		if err != nil {
			return 0, "", "", err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", user)
		res, err := hc.Do(req)
		if err != nil {
			return 0, "", "", err
		}
		defer res.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(res.Body, 4<<10))
		var b struct {
			OrderID string `json:"order_id"`
			Error   struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		_ = json.Unmarshal(data, &b)
		return res.StatusCode, b.OrderID, b.Error.Code, nil
	}
}

// withResponses is the generated ClientWithResponses: its request builder, and its parser of
// every status's body and headers.
func withResponses(tb testing.TB, hc *http.Client, server string) purchaseFunc {
	c, err := client.NewClientWithResponses(server, client.WithHTTPClient(hc))
	if err != nil {
		tb.Fatal(err)
	}
	one := 1
	return func(ctx context.Context, user string) (int, string, string, error) {
		rsp, err := c.PurchaseWithResponse(ctx, 7, &client.PurchaseParams{IdempotencyKey: &user}, client.PurchaseRequest{UserID: &user, Quantity: &one})
		if err != nil {
			return 0, "", "", err
		}
		var order, code string
		if rsp.JSON202 != nil {
			order = rsp.JSON202.OrderID
		}
		if e := errorOf(rsp); e != nil {
			code = string(e.Error.Code)
		}
		return rsp.StatusCode(), order, code, nil
	}
}

func errorOf(r *client.PurchaseResponse) *client.Error {
	for _, e := range []*client.Error{r.JSON400, r.JSON401, r.JSON403, r.JSON404, r.JSON409, r.JSON413, r.JSON415, r.JSON429, r.JSON503} {
		if e != nil {
			return e
		}
	}
	return nil
}

// builder is the generated request builder (NewPurchaseRequest) with a decode of its own into
// the generated types.
func builder(hc *http.Client, server string) purchaseFunc {
	one := 1
	return func(ctx context.Context, user string) (int, string, string, error) {
		req, err := client.NewPurchaseRequest(server, 7, &client.PurchaseParams{IdempotencyKey: &user}, client.PurchaseRequest{UserID: &user, Quantity: &one})
		if err != nil {
			return 0, "", "", err
		}
		res, err := hc.Do(req.WithContext(ctx))
		if err != nil {
			return 0, "", "", err
		}
		defer res.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(res.Body, 4<<10))
		var a client.PurchaseAnswer
		_ = json.Unmarshal(data, &a)
		return res.StatusCode, a.OrderID, string(a.Error.Code), nil
	}
}

// lean is this package's PurchaseURL, once, then NewLeanPurchase and ReadPurchaseAnswer: what
// the load generators use.
func lean(tb testing.TB, hc *http.Client, server string) purchaseFunc {
	url, err := client.PurchaseURL(server, 7)
	if err != nil {
		tb.Fatal(err)
	}
	one := 1
	return func(ctx context.Context, user string) (int, string, string, error) {
		req, err := client.NewLeanPurchase(ctx, url, client.PurchaseParams{IdempotencyKey: &user}, client.PurchaseRequest{UserID: &user, Quantity: &one})
		if err != nil {
			return 0, "", "", err
		}
		res, err := hc.Do(req)
		if err != nil {
			return 0, "", "", err
		}
		a, _ := client.ReadPurchaseAnswer(res)
		return res.StatusCode, a.OrderID, string(a.Error.Code), nil
	}
}

func benchPurchase(b *testing.B, hc *http.Client, server string) {
	for _, v := range []struct {
		name string
		buy  purchaseFunc
	}{
		{"handwritten", handWritten(hc, server)},
		{"withresponses", withResponses(b, hc, server)},
		{"builder", builder(hc, server)},
		{"lean", lean(b, hc, server)},
	} {
		b.Run(v.name, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				status, order, _, err := v.buy(ctx, "stampede-s1-"+strconv.Itoa(i))
				if err != nil || status != http.StatusAccepted || order == "" {
					b.Fatalf("%d %q %v", status, order, err)
				}
			}
		})
	}
}

func BenchmarkPurchase(b *testing.B) {
	srv := httptest.NewServer(cannedHandler())
	defer srv.Close()
	benchPurchase(b, srv.Client(), srv.URL)
}

func BenchmarkPurchaseClientOnly(b *testing.B) {
	benchPurchase(b, &http.Client{Transport: cannedTransport{}}, "http://seckill.test")
}
