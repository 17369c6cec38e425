package httpapi

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/seckill-go/seckill-go/internal/waitroom/challenge"
)

// The optional bot challenge before a join (issue #32; off by default): a proof of work (ALTCHA)
// or a hosted captcha (Turnstile) that a visitor solves before POST /products/{id}/queue. Only
// the join asks for it: the poll, the purchase and the reads never do.

// ChallengeVerifier checks a visitor's solution before it joins a queue; *challenge.Altcha and
// *turnstile.Verifier implement it (challenge.Verifier).
type ChallengeVerifier interface {
	Verify(ctx context.Context, solution, remoteIP string) error
}

// ChallengeIssuer issues the proof-of-work challenges that GET /api/v1/waitroom/challenge serves;
// *challenge.Altcha implements it (challenge.Challenger).
type ChallengeIssuer interface {
	Issue(ctx context.Context) (challenge.Challenge, error)
}

// solutionHeader carries a join's solution: the ALTCHA widget's base64 payload (what it would post
// as its form field "altcha") or a Turnstile token. A header, as Admission-Pass is: the join's
// body stays the buyer, and a credential is not a field of the resource.
const solutionHeader = "Challenge-Solution"

// The challenge's refusals, with codes of their own (errorTable).
const (
	codeChallengeRequired = "challenge_required"
	codeChallengeInvalid  = "challenge_invalid"
	codeChallengeExpired  = "challenge_expired"
)

// challengeJSON is an ALTCHA challenge in the shape its widget fetches from its challengeurl
// ("maxnumber" in lower case, as the widget reads it), plus when it expires.
type challengeJSON struct {
	Algorithm string `json:"algorithm"`
	Challenge string `json:"challenge"`
	MaxNumber int64  `json:"maxnumber"`
	Salt      string `json:"salt"`
	Signature string `json:"signature"`
	ExpiresAt string `json:"expires_at"`
}

func toChallengeJSON(c challenge.Challenge) challengeJSON {
	return challengeJSON{Algorithm: c.Algorithm, Challenge: c.Challenge, MaxNumber: c.MaxNumber, Salt: c.Salt,
		Signature: c.Signature, ExpiresAt: formatTime(c.Expires)}
}

// issueChallenge answers a new challenge (no-store, as every answer but the public reads': each
// is single-use).
func (h *handlers) issueChallenge(issuer ChallengeIssuer) gin.HandlerFunc {
	return func(c *gin.Context) {
		ch, err := issuer.Issue(c.Request.Context())
		if err != nil {
			h.respondError(c, err)
			return
		}
		c.JSON(http.StatusOK, toChallengeJSON(ch))
	}
}

// requireChallenge refuses a join whose Challenge-Solution header is missing, sent twice, or not
// a valid, unexpired, unused solution, before the join's body is read or its queue asked: a
// refused join costs the verification and nothing else.
func (h *handlers) requireChallenge(v ChallengeVerifier) gin.HandlerFunc {
	return func(c *gin.Context) {
		solution, err := onlyHeader(c.Request.Header, solutionHeader)
		if err == nil {
			err = v.Verify(c.Request.Context(), solution, c.ClientIP())
		}
		if err != nil {
			h.respondError(c, err)
		}
	}
}
