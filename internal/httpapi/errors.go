package httpapi

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/stampede"
	"github.com/seckill-go/seckill-go/internal/waitroom"
	"github.com/seckill-go/seckill-go/internal/waitroom/challenge"
)

// The API's error codes beyond the domain's (sale.Code): refusals of the HTTP layer itself.
const (
	codeUnauthorized     = "unauthorized"
	codeMethodNotAllowed = "method_not_allowed"
	codePayloadTooLarge  = "payload_too_large"
	codeHeaderTooLarge   = "header_too_large"
	codeUnsupportedMedia = "unsupported_media_type"
	codeStampedeRunning  = "stampede_running"
	codeNotFound         = string(sale.CodeNotFound) // no such endpoint or file
)

// statusOf is the HTTP status of each domain code.
var statusOf = map[sale.Code]int{
	sale.CodeInvalid:           http.StatusBadRequest,
	sale.CodeNotFound:          http.StatusNotFound,
	sale.CodeSaleNotStarted:    http.StatusForbidden,
	sale.CodeSaleEnded:         http.StatusForbidden,
	sale.CodeSoldOut:           http.StatusConflict,
	sale.CodeLimitReached:      http.StatusConflict,
	sale.CodeRateLimited:       http.StatusTooManyRequests,
	sale.CodePassRequired:      http.StatusForbidden,
	sale.CodePassInvalid:       http.StatusForbidden,
	sale.CodePassExpired:       http.StatusForbidden,
	sale.CodeUnavailable:       http.StatusServiceUnavailable,
	sale.CodeUnconfirmed:       http.StatusServiceUnavailable,
	sale.CodeOrderNotConfirmed: http.StatusConflict,
	sale.CodeOrderExpired:      http.StatusConflict,
	sale.CodeOrderCancelled:    http.StatusConflict,
	sale.CodeOrderPaid:         http.StatusConflict,
	sale.CodeOrderRefused:      http.StatusConflict,
	sale.CodePaymentInProgress: http.StatusConflict,
	sale.CodePaymentDeclined:   http.StatusPaymentRequired,
	sale.CodeAmountOutOfRange:  http.StatusConflict,
}

// errorTable maps errors to a status and a code: the domain's table (sale.ErrorCodes), then the
// errors of the HTTP layer and of the stampede runner that have a code of their own. The first
// match wins. Anything not in it is a bug: 500 with a generic message, details in the log.
var errorTable = withBodies(append(domainErrors(),
	errorMapping{err: errBodyTooLarge, status: http.StatusRequestEntityTooLarge, code: codePayloadTooLarge},
	errorMapping{err: errHeaderTooLarge, status: http.StatusRequestHeaderFieldsTooLarge, code: codeHeaderTooLarge},
	errorMapping{err: errNotJSON, status: http.StatusUnsupportedMediaType, code: codeUnsupportedMedia},
	errorMapping{err: errBuyerToken, status: http.StatusUnauthorized, code: codeUnauthorized},
	errorMapping{err: errUserMismatch, status: http.StatusForbidden, code: codeUserMismatch},
	errorMapping{err: stampede.ErrBusy, status: http.StatusConflict, code: codeStampedeRunning},
	errorMapping{err: waitroom.ErrNoWaitingRoom, status: http.StatusConflict, code: codeNoWaitingRoom},
	errorMapping{err: waitroom.ErrQueueNotOpen, status: http.StatusForbidden, code: codeQueueNotOpen},
	errorMapping{err: challenge.ErrRequired, status: http.StatusForbidden, code: codeChallengeRequired},
	errorMapping{err: challenge.ErrInvalid, status: http.StatusForbidden, code: codeChallengeInvalid},
	errorMapping{err: challenge.ErrExpired, status: http.StatusForbidden, code: codeChallengeExpired},
	errorMapping{err: challenge.ErrUnavailable, status: http.StatusServiceUnavailable, code: string(sale.CodeUnavailable)},
))

func domainErrors() []errorMapping {
	var out []errorMapping
	for _, e := range sale.ErrorCodes() {
		status, ok := statusOf[e.Code]
		if !ok {
			panic("httpapi: no HTTP status for the code " + string(e.Code))
		}
		out = append(out, errorMapping{err: e.Err, status: status, code: string(e.Code)})
	}
	return out
}

// The messages of the errors whose details are logged, not shown. An unconfirmed purchase has a
// message of its own: unlike every other 5xx, something may have changed, and the buyer must
// retry with the same Idempotency-Key to learn what.
const (
	msgUnavailable = "a dependency is unavailable or too slow; nothing was changed, retry shortly"
	msgUnconfirmed = "the purchase is decided but not yet confirmed by the Redis replicas; retry with the same Idempotency-Key to get its answer"
	msgInternal    = "internal error; it has been logged with the request id"
)

type errorMapping struct {
	err    error
	status int
	code   string
	// body is the encoded answer to err itself, or to any error of a 5xx: their messages are
	// fixed, so a sold-out (the answer most buyers of a flash sale get) costs no encoding.
	body []byte
}

func withBodies(table []errorMapping) []errorMapping {
	for i, e := range table {
		msg := e.err.Error()
		switch {
		case e.code == string(sale.CodeUnconfirmed):
			msg = msgUnconfirmed
		case e.status >= 500:
			msg = msgUnavailable
		}
		table[i].body = encodeError(e.code, msg)
	}
	return table
}

// internalBody answers an error that is not in errorTable.
var internalBody = encodeError(string(sale.CodeInternal), msgInternal)

func encodeError(code, msg string) []byte {
	body, err := json.Marshal(errorBody{Error: errorDetail{Code: code, Message: msg}})
	if err != nil {
		panic(err) // two strings always encode
	}
	return body
}

// mapError returns err's entry of errorTable, or nil. A bare sentinel, the common case, is found
// by comparison, without unwrapping err against every entry. The table holds no sentinel that
// wraps an earlier one, so the two loops agree (TestMapErrorFastPath).
func mapError(err error) *errorMapping {
	for i := range errorTable {
		if err == errorTable[i].err {
			return &errorTable[i]
		}
	}
	for i := range errorTable {
		if errors.Is(err, errorTable[i].err) {
			return &errorTable[i]
		}
	}
	return nil
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// respondError writes err as the API's JSON error. 4xx messages come from the error itself and
// are meant for the caller; 5xx messages are generic and the error is logged, once, here.
func (h *handlers) respondError(c *gin.Context, err error) {
	e := mapError(err)
	switch {
	case e == nil:
		h.logFor(c).Error("request failed unexpectedly", "err", err)
		abortJSONBody(c, http.StatusInternalServerError, internalBody)
		return
	case e.code == string(sale.CodeUnconfirmed):
		// Not a fault of this request: the replicas are slow or away, and the retry is the answer.
		c.Writer.Header()["Retry-After"] = retryAfter
	case e.status >= 500:
		h.logFor(c).Warn("request failed", "status", e.status, "err", err)
	case e.status == http.StatusTooManyRequests:
		c.Writer.Header()["Retry-After"] = retryAfter
		if rl := (*sale.RateLimitedError)(nil); errors.As(err, &rl) && rl.Wait > time.Second {
			c.Writer.Header()["Retry-After"] = []string{retryAfterSeconds(rl.Wait)}
		}
	}
	if e.status >= 500 || err == e.err {
		abortJSONBody(c, e.status, e.body)
		return
	}
	abortJSON(c, e.status, e.code, err.Error())
}

var (
	// jsonContentType is gin's for c.JSON; shared as gin shares its own, never modified.
	jsonContentType = []string{"application/json; charset=utf-8"}
	retryAfter      = []string{"1"}
)

func abortJSON(c *gin.Context, status int, code, msg string) {
	c.AbortWithStatusJSON(status, errorBody{Error: errorDetail{Code: code, Message: msg}})
}

// abortJSONBody is abortJSON with the body already encoded.
func abortJSONBody(c *gin.Context, status int, body []byte) {
	c.Abort()
	if h := c.Writer.Header(); len(h["Content-Type"]) == 0 {
		h["Content-Type"] = jsonContentType
	}
	c.Status(status)
	_, _ = c.Writer.Write(body)
}

// logFor returns the logger of c's request (h.log with its request id).
func (h *handlers) logFor(c *gin.Context) *slog.Logger { return requestLog(h.log, c) }
