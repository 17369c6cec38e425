package httpapi

import (
	"errors"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
)

// The buyer-identity refusals, with codes of their own (errorTable).
var (
	errBuyerToken   = errors.New("this needs Authorization: Bearer <buyer token>, signed by the shop and unexpired")
	errUserMismatch = errors.New("user_id is not the buyer token's subject")
)

const codeUserMismatch = "user_mismatch"

// buyerID returns the user id a purchase or an order's read, payment or cancel acts for. Without
// buyer tokens (Config.Buyers nil) it is the user_id the client gives, a claim. With them it is
// the verified token's subject; a user_id that names someone else is refused, an absent one is
// the subject.
func (h *handlers) buyerID(c *gin.Context, claimed string) (string, error) {
	if h.buyers == nil {
		return claimed, nil
	}
	tok, _ := bearerToken(c.Request.Header)
	id, err := h.buyers.UserID(tok)
	if err != nil {
		h.logFor(c).Debug("buyer token refused", "err", err)
		c.Header("WWW-Authenticate", `Bearer realm="seckill", error="invalid_token"`)
		return "", errBuyerToken
	}
	if claimed != "" && claimed != id {
		return "", errUserMismatch
	}
	return id, nil
}

// bearerToken returns the credentials of the request's Authorization header when its scheme is
// Bearer, matched regardless of case (RFC 7235: every auth scheme is case-insensitive). A bare
// token without a scheme, another scheme, an empty token or one with blanks inside, and a
// request with two Authorization headers have none (ok false): credentials are read one way
// only, never guessed at.
func bearerToken(h http.Header) (token string, ok bool) {
	v := h["Authorization"]
	if len(v) != 1 {
		return "", false
	}
	scheme, token, ok := strings.Cut(v[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimLeft(token, " ")
	if token == "" || strings.ContainsAny(token, " \t") {
		return "", false
	}
	return token, true
}
