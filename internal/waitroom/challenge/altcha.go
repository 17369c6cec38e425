package challenge

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/altcha-org/altcha-lib-go"
)

// The defaults of an Altcha.
const (
	// DefaultMaxNumber is ALTCHA's reference complexity: about a second on a 2020 phone, a third
	// of one on a 2023 laptop (altcha.org's figures), and about 50,000 SHA-256 on average.
	DefaultMaxNumber = 100_000
	// DefaultExpires is how long a challenge may be solved and used: a visitor fetches it, solves
	// it in a second or two and joins. It is also how long a spent one is remembered.
	DefaultExpires = 2 * time.Minute
	// MaxSolutionLen bounds the solution read: a genuine one is about 300 characters.
	MaxSolutionLen = 2048
	// Algorithm is the only one issued and accepted.
	Algorithm = "SHA-256"
	// spentMargin is how much longer than its expiry a spent challenge is remembered: another
	// replica whose clock is this far behind still refuses its replay.
	spentMargin = time.Minute
)

// AltchaOptions are an Altcha's settings; the zero values take the defaults.
type AltchaOptions struct {
	// MaxNumber is the range of the secret number: the difficulty (the work is MaxNumber/2
	// hashes on average).
	MaxNumber int64
	// Expires is a challenge's lifetime.
	Expires time.Duration
	// Now defaults to time.Now.
	Now func() time.Time
}

// Altcha issues and verifies ALTCHA (v1) proof-of-work challenges, with
// github.com/altcha-org/altcha-lib-go for the protocol's hashing and signing; what it adds is the
// policy the library leaves to its caller: SHA-256 only, an expiry required and reported as
// such, and each solution accepted once (Spent).
type Altcha struct {
	key       string
	maxNumber int64
	expires   time.Duration
	spent     Spent
	now       func() time.Time
}

var (
	_ Verifier   = (*Altcha)(nil)
	_ Challenger = (*Altcha)(nil)
)

// NewAltcha returns an Altcha that signs with key (at least 32 bytes; every replica needs the
// same one, since any replica verifies what another issued) and remembers spent challenges in
// spent.
func NewAltcha(key []byte, spent Spent, o AltchaOptions) (*Altcha, error) {
	switch {
	case len(key) < 32:
		return nil, errors.New("challenge: an ALTCHA key needs at least 32 bytes")
	case spent == nil:
		return nil, errors.New("challenge: a replay cache (Spent) is required")
	case o.MaxNumber < 0 || o.Expires < 0:
		return nil, errors.New("challenge: MaxNumber and Expires must not be negative")
	}
	if o.MaxNumber == 0 {
		o.MaxNumber = DefaultMaxNumber
	}
	if o.Expires == 0 {
		o.Expires = DefaultExpires
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Altcha{key: string(key), maxNumber: o.MaxNumber, expires: o.Expires, spent: spent, now: o.Now}, nil
}

// Issue makes a new challenge: a random salt with its expiry, a random secret number, and the
// signature. It costs one SHA-256 and one HMAC; nothing is stored.
func (a *Altcha) Issue(context.Context) (Challenge, error) {
	expires := a.now().Add(a.expires).Truncate(time.Second)
	c, err := altcha.CreateChallenge(altcha.ChallengeOptions{
		Algorithm: altcha.SHA256,
		MaxNumber: a.maxNumber,
		HMACKey:   a.key,
		Expires:   &expires,
	})
	if err != nil {
		return Challenge{}, fmt.Errorf("challenge: issuing: %w", err)
	}
	return Challenge{Algorithm: c.Algorithm, Challenge: c.Challenge, MaxNumber: c.MaxNumber, Salt: c.Salt, Signature: c.Signature, Expires: expires}, nil
}

// payload is the solution as the ALTCHA widget sends it, base64-encoded JSON. The widget adds
// fields of its own ("took", "test"), which are ignored.
type payload struct {
	Algorithm string `json:"algorithm"`
	Challenge string `json:"challenge"`
	Number    *int64 `json:"number"`
	Salt      string `json:"salt"`
	Signature string `json:"signature"`
}

// Verify checks a solution: the payload decodes, its algorithm is SHA-256, its number solves its
// challenge and the challenge bears our signature (the library's constant-time check), it has
// not expired, and it was not used before (then it is spent). The refusals are ErrRequired,
// ErrInvalid, ErrExpired and, when Spent cannot be asked, ErrUnavailable.
func (a *Altcha) Verify(ctx context.Context, solution, _ string) error {
	if solution == "" {
		return ErrRequired
	}
	if len(solution) > MaxSolutionLen {
		return fmt.Errorf("%w: longer than %d characters", ErrInvalid, MaxSolutionLen)
	}
	raw, err := base64.StdEncoding.DecodeString(solution)
	if err != nil {
		return fmt.Errorf("%w: not base64", ErrInvalid)
	}
	var p payload
	if err := json.Unmarshal(raw, &p); err != nil {
		return fmt.Errorf("%w: not a JSON object of an ALTCHA solution", ErrInvalid)
	}
	switch {
	case p.Algorithm != Algorithm:
		return fmt.Errorf("%w: the algorithm must be %s", ErrInvalid, Algorithm)
	case p.Number == nil || *p.Number < 0:
		return fmt.Errorf("%w: no number, or a negative one", ErrInvalid)
	case len(p.Challenge) != 64 || !isHex(p.Challenge):
		return fmt.Errorf("%w: the challenge is not a SHA-256 in hex", ErrInvalid)
	}
	ok, err := altcha.VerifySolutionSafe(altcha.Payload{Algorithm: p.Algorithm, Challenge: p.Challenge, Number: *p.Number, Salt: p.Salt, Signature: p.Signature}, a.key, false)
	if err != nil || !ok {
		return fmt.Errorf("%w: its number does not solve its challenge, or the challenge is not signed by this server", ErrInvalid)
	}
	// The salt is signed (the challenge hashes it), so its expiry is ours.
	exp, err := strconv.ParseInt(altcha.ExtractParams(altcha.Payload{Salt: p.Salt}).Get("expires"), 10, 64)
	if err != nil {
		return fmt.Errorf("%w: the challenge has no expiry", ErrInvalid)
	}
	expires := time.Unix(exp, 0)
	if a.now().After(expires) {
		return ErrExpired
	}
	first, err := a.spent.Spend(ctx, p.Challenge, expires.Add(spentMargin))
	if err != nil {
		return fmt.Errorf("%w: the replay cache: %w", ErrUnavailable, err)
	}
	if !first {
		return fmt.Errorf("%w: it was used already: solve a new challenge", ErrInvalid)
	}
	return nil
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Solution encodes the solution of c with number as the ALTCHA widget sends it: base64 of the JSON
// {algorithm, challenge, number, salt, signature}.
func Solution(c Challenge, number int64) string {
	b, err := json.Marshal(payload{Algorithm: c.Algorithm, Challenge: c.Challenge, Number: &number, Salt: c.Salt, Signature: c.Signature})
	if err != nil {
		panic(err) // strings and a number always encode
	}
	return base64.StdEncoding.EncodeToString(b)
}

// hexChallenge decodes c's challenge for the solver.
func hexChallenge(c Challenge) ([]byte, error) {
	if c.Algorithm != Algorithm {
		return nil, fmt.Errorf("challenge: cannot solve %q: only %s", c.Algorithm, Algorithm)
	}
	want, err := hex.DecodeString(c.Challenge)
	if err != nil || len(want) != 32 {
		return nil, fmt.Errorf("challenge: %q is not a SHA-256 in hex", c.Challenge)
	}
	return want, nil
}
