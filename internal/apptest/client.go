package apptest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/api/apitest"
)

// Client calls the JSON API of one instance, as the tests do.
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
	res, err := httpClient.Do(req)
	if err != nil {
		return Response{}, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return Response{}, err
	}
	r := Response{Status: res.StatusCode, Header: res.Header, Raw: string(raw)}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &r.Body); err != nil {
			return r, fmt.Errorf("%s %s: %d with a body that is no JSON object: %q", method, path, r.Status, raw)
		}
	}
	// Every answer is held to the API's contract, api/openapi.yaml: the end-to-end suites'
	// answers are its evidence.
	v, err := apitest.Default()
	if err != nil {
		return r, err
	}
	return r, v.Check(method, req.URL.RequestURI(), r.Status, r.Header, raw)
}

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
// returns its id; product holds the fields of the admin create request.
func (c Client) CreateProduct(tb testing.TB, product map[string]any) int64 {
	tb.Helper()
	r := c.MustDo(tb, http.MethodPost, "/api/v1/admin/products", product, nil)
	if r.Status != http.StatusCreated || r.Num("id") == 0 {
		tb.Fatalf("create product: %d %s", r.Status, r.Raw)
	}
	return int64(r.Num("id"))
}
