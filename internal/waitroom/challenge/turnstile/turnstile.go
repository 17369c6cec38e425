// Package turnstile verifies Cloudflare Turnstile tokens with its siteverify endpoint: the bot
// challenge's hosted kind (challenge.Verifier). The visitor's browser runs Cloudflare's widget
// with the site's public site key and gets a token; the join sends it, and Verify asks Cloudflare
// whether it is genuine. Cloudflare keeps the replay state: a token is valid for 300 s and
// validates once (a second siteverify answers timeout-or-duplicate), so no cache is kept here.
package turnstile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/seckill-go/seckill-go/internal/waitroom/challenge"
)

// DefaultURL is Cloudflare's siteverify endpoint.
const DefaultURL = "https://challenges.cloudflare.com/turnstile/v0/siteverify"

// MaxTokenLen is the longest token Cloudflare issues: a longer one is refused without asking it.
const MaxTokenLen = 2048

// DefaultTimeout bounds one siteverify call: a join waits for it.
const DefaultTimeout = 3 * time.Second

// Options are a Verifier's settings; the zero values take the defaults.
type Options struct {
	// URL is the siteverify endpoint [DefaultURL]; the tests point it at a local stand-in.
	URL string
	// Client makes the calls [a client of its own with Timeout].
	Client *http.Client
	// Timeout bounds one call [DefaultTimeout].
	Timeout time.Duration
}

// Verifier checks Turnstile tokens with one site's secret key.
type Verifier struct {
	secret string
	url    string
	client *http.Client
}

var _ challenge.Verifier = (*Verifier)(nil)

// New returns a Verifier for the site whose secret key is secret.
func New(secret string, o Options) (*Verifier, error) {
	if secret == "" {
		return nil, errors.New("turnstile: a secret key is required")
	}
	if o.URL == "" {
		o.URL = DefaultURL
	}
	if u, err := url.Parse(o.URL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("turnstile: %q is not an http(s) URL", o.URL)
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: o.Timeout}
	}
	return &Verifier{secret: secret, url: o.URL, client: o.Client}, nil
}

// answer is siteverify's JSON answer.
type answer struct {
	Success    bool     `json:"success"`
	ErrorCodes []string `json:"error-codes"`
	Hostname   string   `json:"hostname"`
	Action     string   `json:"action"`
}

// ourFault are the error codes that say the request, not the visitor's token, is wrong (our secret
// key, our request) or that Cloudflare failed: the visitor can do nothing about them, so they are
// ErrUnavailable (a 503, logged), not a refusal.
var ourFault = []string{"missing-input-secret", "invalid-input-secret", "bad-request", "internal-error"}

// Verify asks siteverify about token, with the visitor's address. A token Cloudflare refuses is
// ErrInvalid (timeout-or-duplicate included: expired, or used already); no answer, a non-200
// answer or an answer blaming our own request is ErrUnavailable.
func (v *Verifier) Verify(ctx context.Context, token, remoteIP string) error {
	if token == "" {
		return challenge.ErrRequired
	}
	if len(token) > MaxTokenLen {
		return fmt.Errorf("%w: longer than %d characters", challenge.ErrInvalid, MaxTokenLen)
	}
	form := url.Values{"secret": {v.secret}, "response": {token}}
	if remoteIP != "" {
		form.Set("remoteip", remoteIP)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, v.url, strings.NewReader(form.Encode()))
	if err != nil {
		return fmt.Errorf("%w: %w", challenge.ErrUnavailable, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := v.client.Do(req)
	if err != nil {
		return fmt.Errorf("%w: siteverify: %w", challenge.ErrUnavailable, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: siteverify answered %s", challenge.ErrUnavailable, res.Status)
	}
	var a answer
	if err := json.NewDecoder(io.LimitReader(res.Body, 64<<10)).Decode(&a); err != nil {
		return fmt.Errorf("%w: siteverify's answer: %w", challenge.ErrUnavailable, err)
	}
	if a.Success {
		return nil
	}
	codes := strings.Join(a.ErrorCodes, ",")
	if slices.ContainsFunc(a.ErrorCodes, func(c string) bool { return slices.Contains(ourFault, c) }) {
		return fmt.Errorf("%w: siteverify refused our request (%s)", challenge.ErrUnavailable, codes)
	}
	return fmt.Errorf("%w: Turnstile refused the token (%s)", challenge.ErrInvalid, codes)
}
