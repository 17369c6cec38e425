package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/stampede"
)

// Stable error codes of the API, in the body of every error as {"error":{"code":…,"message":…}}.
const (
	codeInvalid          = "invalid_request"
	codeUnauthorized     = "unauthorized"
	codeNotFound         = "not_found"
	codeMethodNotAllowed = "method_not_allowed"
	codeSaleNotStarted   = "sale_not_started"
	codeSaleEnded        = "sale_ended"
	codeSoldOut          = "sold_out"
	codeLimitReached     = "limit_reached"
	codePayloadTooLarge  = "payload_too_large"
	codeRateLimited      = "rate_limited"
	codeUnavailable      = "unavailable"
	codeStampedeRunning  = "stampede_running"
	codeInternal         = "internal"
)

// errorTable maps domain errors to a status and a code; the first match wins. Anything not in
// it is a bug: 500 with a generic message, details in the log.
var errorTable = withBodies([]errorMapping{
	{err: sale.ErrInvalid, status: http.StatusBadRequest, code: codeInvalid},
	{err: sale.ErrNotFound, status: http.StatusNotFound, code: codeNotFound},
	{err: sale.ErrSaleNotStarted, status: http.StatusForbidden, code: codeSaleNotStarted},
	{err: sale.ErrSaleEnded, status: http.StatusForbidden, code: codeSaleEnded},
	{err: sale.ErrSoldOut, status: http.StatusConflict, code: codeSoldOut},
	{err: sale.ErrLimitReached, status: http.StatusConflict, code: codeLimitReached},
	{err: sale.ErrRateLimited, status: http.StatusTooManyRequests, code: codeRateLimited},
	{err: sale.ErrUnavailable, status: http.StatusServiceUnavailable, code: codeUnavailable},
	{err: stampede.ErrInvalidPlan, status: http.StatusBadRequest, code: codeInvalid},
	{err: stampede.ErrUnknown, status: http.StatusNotFound, code: codeNotFound},
	{err: stampede.ErrBusy, status: http.StatusConflict, code: codeStampedeRunning},
	{err: stampede.ErrStopped, status: http.StatusServiceUnavailable, code: codeUnavailable},
	{err: stampede.ErrUnavailable, status: http.StatusServiceUnavailable, code: codeUnavailable},
	{err: context.DeadlineExceeded, status: http.StatusServiceUnavailable, code: codeUnavailable},
	{err: context.Canceled, status: http.StatusServiceUnavailable, code: codeUnavailable},
})

// The messages of the errors whose details are logged, not shown.
const (
	msgUnavailable = "a dependency is unavailable or too slow; nothing was changed, retry shortly"
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
		if e.status >= 500 {
			msg = msgUnavailable
		}
		table[i].body = encodeError(e.code, msg)
	}
	return table
}

// internalBody answers an error that is not in errorTable.
var internalBody = encodeError(codeInternal, msgInternal)

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
	case e.status >= 500:
		h.logFor(c).Warn("request failed", "status", e.status, "err", err)
	case e.status == http.StatusTooManyRequests:
		c.Writer.Header()["Retry-After"] = retryAfter
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
