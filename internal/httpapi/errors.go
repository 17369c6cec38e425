package httpapi

import (
	"context"
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
var errorTable = []struct {
	err    error
	status int
	code   string
}{
	{sale.ErrInvalid, http.StatusBadRequest, codeInvalid},
	{sale.ErrNotFound, http.StatusNotFound, codeNotFound},
	{sale.ErrSaleNotStarted, http.StatusForbidden, codeSaleNotStarted},
	{sale.ErrSaleEnded, http.StatusForbidden, codeSaleEnded},
	{sale.ErrSoldOut, http.StatusConflict, codeSoldOut},
	{sale.ErrLimitReached, http.StatusConflict, codeLimitReached},
	{sale.ErrRateLimited, http.StatusTooManyRequests, codeRateLimited},
	{sale.ErrUnavailable, http.StatusServiceUnavailable, codeUnavailable},
	{stampede.ErrInvalidPlan, http.StatusBadRequest, codeInvalid},
	{stampede.ErrUnknown, http.StatusNotFound, codeNotFound},
	{stampede.ErrBusy, http.StatusConflict, codeStampedeRunning},
	{stampede.ErrStopped, http.StatusServiceUnavailable, codeUnavailable},
	{stampede.ErrUnavailable, http.StatusServiceUnavailable, codeUnavailable},
	{context.DeadlineExceeded, http.StatusServiceUnavailable, codeUnavailable},
	{context.Canceled, http.StatusServiceUnavailable, codeUnavailable},
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
	for _, e := range errorTable {
		if !errors.Is(err, e.err) {
			continue
		}
		msg := err.Error()
		if e.status >= 500 {
			msg = "a dependency is unavailable or too slow; nothing was changed, retry shortly"
			h.logFor(c).Warn("request failed", "status", e.status, "err", err)
		}
		if e.status == http.StatusTooManyRequests {
			c.Header("Retry-After", "1")
		}
		abortJSON(c, e.status, e.code, msg)
		return
	}
	h.logFor(c).Error("request failed unexpectedly", "err", err)
	abortJSON(c, http.StatusInternalServerError, codeInternal, "internal error; it has been logged with the request id")
}

func abortJSON(c *gin.Context, status int, code, msg string) {
	c.AbortWithStatusJSON(status, errorBody{Error: errorDetail{Code: code, Message: msg}})
}

// logFor returns the logger of c's request (h.log with its request id).
func (h *handlers) logFor(c *gin.Context) *slog.Logger { return requestLog(h.log, c) }
