package httpapi

import (
	"errors"
	"strings"

	"github.com/gin-gonic/gin"
)

// The buyer-identity refusals, with codes of their own (errorTable).
var (
	errBuyerToken   = errors.New("purchases need Authorization: Bearer <buyer token>, signed by the shop and unexpired")
	errUserMismatch = errors.New("user_id is not the buyer token's subject")
)

const codeUserMismatch = "user_mismatch"

// buyerID returns the purchase's user id. Without buyer tokens (Config.Buyers nil) it is the
// body's user_id, a claim the client makes. With them it is the verified token's subject; a body
// user_id that names someone else is refused, an absent one is the subject.
func (h *handlers) buyerID(c *gin.Context, claimed string) (string, error) {
	if h.buyers == nil {
		return claimed, nil
	}
	tok, _ := strings.CutPrefix(c.GetHeader("Authorization"), "Bearer ")
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
