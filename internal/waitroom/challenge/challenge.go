// Package challenge is the optional bot challenge a visitor passes before it joins a sale's
// waiting room (issue #32): a Challenger issues challenges, a Verifier checks a visitor's
// solution. Two kinds plug in: Altcha, a self-hosted proof of work (the ALTCHA protocol, v1:
// SHA-256 over a signed salt), and a hosted captcha such as Cloudflare Turnstile
// (internal/waitroom/challenge/turnstile), which issues its challenges in the visitor's browser and
// is only asked to verify. The challenge only makes joining cost something; it never decides who
// is admitted, and it is never asked by a poll or a purchase.
//
// This package does no I/O of its own: the replay cache that a shared deployment needs is a
// Spent given to Altcha (redisspent keeps it in Redis; MemorySpent in this process).
package challenge

import (
	"context"
	"errors"
	"time"
)

// The refusals of a Verifier. A refusal wraps one of them; the HTTP layer maps each to a 403 (and
// ErrUnavailable to a 503) and shows the message of a 4xx to the visitor.
var (
	// ErrRequired: no solution was given.
	ErrRequired = errors.New("a bot challenge solution is required to join this queue: solve a challenge and send it in the Challenge-Solution header")
	// ErrInvalid: the solution is not genuine (malformed, another algorithm, a signature that is
	// not ours, a number that does not solve it) or it was used already.
	ErrInvalid = errors.New("the bot challenge solution is not valid")
	// ErrExpired: a genuine solution of a challenge that has expired.
	ErrExpired = errors.New("the bot challenge has expired: solve a new one")
	// ErrUnavailable: the solution could not be checked (the replay cache or the captcha
	// service did not answer, or refused our own credentials). Nothing was decided.
	ErrUnavailable = errors.New("the bot challenge could not be checked")
)

// Verifier checks a visitor's solution before it joins a queue. remoteIP is the client's address
// as the HTTP layer sees it (a hosted captcha may use it; a proof of work ignores it). An empty
// solution is ErrRequired. A solution passes once: a second Verify of the same one is refused.
type Verifier interface {
	Verify(ctx context.Context, solution, remoteIP string) error
}

// Challenger issues the challenges a visitor solves. A hosted captcha has none: its widget gets
// its challenge from the captcha service.
type Challenger interface {
	Issue(ctx context.Context) (Challenge, error)
}

// Challenge is an ALTCHA challenge as the widget fetches it: the visitor finds the number n in
// [0, MaxNumber] with SHA-256(Salt + decimal n) = Challenge, and sends back the challenge with n
// (Solution). Signature is HMAC-SHA-256(key, Challenge), so that the server needs no state until
// the solution comes back; the salt carries the expiry ("…?expires=<unix seconds>&").
type Challenge struct {
	Algorithm string
	Challenge string
	MaxNumber int64
	Salt      string
	Signature string
	// Expires is the end of the challenge's life, also written in the salt.
	Expires time.Time
}

// Spent is the replay cache: it remembers the challenges whose solution was used. Spend
// records id as used until the given time and reports whether it was the first to; an error is
// a cache that could not be asked.
type Spent interface {
	Spend(ctx context.Context, id string, until time.Time) (bool, error)
}
