package apptest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/api/apitest"
	"github.com/seckill-go/seckill-go/api/client"
)

// Client calls the JSON API of one instance, as the tests do: through the client generated from
// the contract (API), or with a request written out (Do) where a test sends what the generated
// client cannot (a malformed body, a header twice, a path off the contract). Every answer, by
// either way, is held to the contract (apitest.Check).
type Client struct {
	URL   string // the instance's base URL (App.URL)
	Token string // if set, sent as the Bearer token of every request (AdminToken for the admin API)
}

// httpClient is every Client's: one connection pool for the test binary, with room for a
// stampede's concurrent buyers to keep their connections.
var httpClient = &http.Client{
	Timeout:   30 * time.Second,
	Transport: &http.Transport{MaxIdleConnsPerHost: 512},
}

// Response is an answer of the API.
type Response struct {
	Status int
	Header http.Header
	Raw    string         // the body as received
	Body   map[string]any // the body decoded; nil if it was empty
}

// ErrorCode returns the code of an error answer ({"error": {"code": …}}), or "".
func (r Response) ErrorCode() string {
	e, _ := r.Body["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

// Str returns the string field key of the body, or "".
func (r Response) Str(key string) string { s, _ := r.Body[key].(string); return s }

// Num returns the number field key of the body as an int, or 0.
func (r Response) Num(key string) int { n, _ := r.Body[key].(float64); return int(n) }

// Do sends a request to path and reads the answer, which must be empty or a JSON object and one
// that api/openapi.yaml describes (apitest.Check: an error otherwise). body is
// nil, a string sent as it is (malformed JSON included), or a value sent as JSON; header is set
// after the token, so it may replace it.
func (c Client) Do(method, path string, body any, header map[string]string) (Response, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			return Response{}, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, c.URL+path, rd)
	if err != nil {
		return Response{}, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, raw, checkErr := send(req)
	if res == nil {
		return Response{}, checkErr
	}
	r := Response{Status: res.StatusCode, Header: res.Header, Raw: string(raw)}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &r.Body); err != nil {
			return r, fmt.Errorf("%s %s: %d with a body that is no JSON object: %q", method, path, r.Status, raw)
		}
	}
	return r, checkErr
}

// send sends req and reads the answer, which it holds to the API's contract, api/openapi.yaml:
// the end-to-end suites' answers are its evidence. The response is nil when there was no
// answer; its Body reads raw again.
func send(req *http.Request) (*http.Response, []byte, error) {
	res, err := httpClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	raw, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		return nil, nil, err
	}
	res.Body = io.NopCloser(bytes.NewReader(raw))
	v, err := apitest.Default()
	if err != nil {
		return res, raw, err
	}
	return res, raw, v.Check(req.Method, req.URL.RequestURI(), res.StatusCode, res.Header, raw)
}

// checked is the generated client's doer: send's, whose answer that breaks the contract is an
// error.
type checked struct{}

func (checked) Do(req *http.Request) (*http.Response, error) {
	res, _, err := send(req)
	if err != nil {
		return nil, err
	}
	return res, nil
}

// API returns the generated client (api/client) of the instance, with c's token on every
// request, whose every answer is held to the contract: one that breaks it is the call's error.
func (c Client) API() *client.ClientWithResponses { return client.New(c.URL, checked{}, c.Token) }

// MustDo is Do that fails the test if the request gets no answer or a body that is no JSON object.
func (c Client) MustDo(tb testing.TB, method, path string, body any, header map[string]string) Response {
	tb.Helper()
	r, err := c.Do(method, path, body, header)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// CreateProduct puts a product on sale through the admin API (c needs the admin token) and
// returns its id; product holds the fields of the admin create request (client.NewProduct's),
// sent as they are.
func (c Client) CreateProduct(tb testing.TB, product map[string]any) int64 {
	tb.Helper()
	body, err := json.Marshal(product)
	if err != nil {
		tb.Fatal(err)
	}
	rsp, err := c.API().AdminCreateProductWithBodyWithResponse(context.Background(), "application/json", bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	if rsp.JSON201 == nil || rsp.JSON201.ID == 0 {
		tb.Fatalf("create product: %d %s", rsp.StatusCode(), rsp.Body)
	}
	return rsp.JSON201.ID
}
