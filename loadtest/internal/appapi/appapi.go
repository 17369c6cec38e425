// Package appapi is the little of seckill-go's HTTP API that the load test and the bench drive
// besides the purchases they measure: admin calls and reads, with the admin token, through the
// client generated from the contract (api/client) — API for the operations it has, Call for a
// caller's own request. It also formats figures the way both reports do.
package appapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/seckill-go/seckill-go/api/client"
)

// Client calls one replica's API.
type Client struct {
	base, token string
	http        *http.Client
	api         *client.ClientWithResponses
}

// New returns a Client of the replica at base (http://host:port) with the admin token.
func New(base, token string) *Client {
	hc := &http.Client{Timeout: 30 * time.Second}
	return &Client{base: base, token: token, http: hc, api: client.New(base, hc, token)}
}

// API returns the generated client of the replica, with the admin token on every request; Want
// checks its answers' status.
func (c *Client) API() *client.ClientWithResponses { return c.api }

// Want returns nil if the answer rsp (its body read into body) has the status want, else a
// *StatusError with the answer.
func Want(rsp *http.Response, body []byte, want int) error {
	if rsp.StatusCode == want {
		return nil
	}
	return &StatusError{Method: rsp.Request.Method, Path: rsp.Request.URL.Path, Status: rsp.StatusCode, Body: string(bytes.TrimSpace(body))}
}

// Call sends body as JSON (when not nil) with the admin token and decodes a want-status answer
// into out. Any other status is an error carrying the answer. It is for the calls API has no
// operation for.
func (c *Client) Call(ctx context.Context, method, path string, body any, want int, out any) error {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	res, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s (is the stack up? `make up`): %w", method, path, err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if res.StatusCode != want {
		return &StatusError{Method: method, Path: path, Status: res.StatusCode, Body: string(bytes.TrimSpace(data))}
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	return nil
}

// WaitVisible waits until every target shows the product (GET /api/v1/products/{id} answers
// 200), at most timeout, and returns the targets that still do not. A replica's read side learns
// of a product created on another within a refresh: a read sent there before is told 404.
func WaitVisible(ctx context.Context, targets []string, productID int64, timeout time.Duration) []string {
	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(timeout)
	var missing []string
	for _, t := range targets {
		c := client.New(t, hc, "")
		for {
			if res, err := c.GetProduct(ctx, productID, nil); err == nil {
				res.Body.Close()
				if res.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				missing = append(missing, t)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return missing
}

// StatusError is an answer of another status than the one a Call wanted.
type StatusError struct {
	Method, Path string
	Status       int
	Body         string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s %s: %d %s %s", e.Method, e.Path, e.Status, http.StatusText(e.Status), e.Body)
}

// Thousands writes n with thousands separators: 12,345.
func Thousands(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
