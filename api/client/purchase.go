package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// The purchase the load generators send (the load test, the stampede), by a leaner way than
// ClientWithResponses: they share the machine's cores with the server they measure, and
// BenchmarkPurchaseClientOnly measures the generated PurchaseWithResponse at 1.15 to 1.4 times the
// client's work of the hand-written purchase they had (52 allocations to 42), these helpers below
// it (39); docs/api.md gives the figures. What they send is still the contract's: the URL comes
// from the generated NewPurchaseRequestWithBody, the body is the generated PurchaseRequest, the
// answer decodes into the generated Receipt and ErrorDetail, and TestLeanPurchaseIsTheGenerated
// holds the request to the one the generated Client sends.

// PurchaseURL returns the URL of product id's purchase at server, as the generated Client writes
// it (a path in server is a prefix, with or without its last slash); a sender computes it once
// per server and product.
func PurchaseURL(server string, id ProductID) (string, error) {
	if !strings.HasSuffix(server, "/") {
		server += "/" // as NewClient does
	}
	req, err := NewPurchaseRequestWithBody(server, id, nil, "", nil)
	if err != nil {
		return "", err
	}
	return req.URL.String(), nil
}

// SetPurchaseHeader sets the header of a purchase with params: its JSON body's Content-Type and
// the params' headers, as the generated NewPurchaseRequest does.
func SetPurchaseHeader(h http.Header, params PurchaseParams) {
	h.Set("Content-Type", "application/json")
	if params.IdempotencyKey != nil {
		h.Set("Idempotency-Key", *params.IdempotencyKey)
	}
	if params.AdmissionPass != nil {
		h.Set("Admission-Pass", *params.AdmissionPass)
	}
}

// NewLeanPurchase returns the request of one purchase at url (PurchaseURL's): what the
// generated NewPurchaseRequest builds, without parsing the URL and styling each parameter again.
func NewLeanPurchase(ctx context.Context, url string, params PurchaseParams, body PurchaseRequest) (*http.Request, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	SetPurchaseHeader(req.Header, params)
	return req, nil
}

// PurchaseAnswer is any answer of a purchase, in the generated types: a 202's Receipt, or an
// error's ErrorDetail (Error.Code is "" on a 202).
type PurchaseAnswer struct {
	Receipt
	Error ErrorDetail `json:"error"`
}

// maxAnswer bounds what ReadPurchaseAnswer reads of an answer; a purchase's are far smaller.
const maxAnswer = 4 << 10

var answerBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// ReadPurchaseAnswer reads and closes res.Body (at most 4 KiB of it) and decodes it. An answer
// whose body is no JSON object (a proxy's page, an empty 429) gives the zero PurchaseAnswer and
// an error; its status is res.StatusCode all the same.
func ReadPurchaseAnswer(res *http.Response) (PurchaseAnswer, error) {
	defer res.Body.Close()
	buf := answerBufs.Get().(*bytes.Buffer)
	defer answerBufs.Put(buf)
	buf.Reset()
	if _, err := buf.ReadFrom(io.LimitReader(res.Body, maxAnswer)); err != nil {
		return PurchaseAnswer{}, err
	}
	return DecodePurchaseAnswer(buf.Bytes())
}

// DecodePurchaseAnswer decodes a purchase's answer body (one that a load tool read, say).
func DecodePurchaseAnswer(body []byte) (PurchaseAnswer, error) {
	var a PurchaseAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return PurchaseAnswer{}, fmt.Errorf("a purchase's answer: %w", err)
	}
	return a, nil
}
