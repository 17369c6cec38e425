package sale

import (
	"context"
	"errors"
)

// Code is the stable name of a purchase's outcome. It is the API's error code (the body of every
// error is {"error":{"code":…,"message":…}}) and the metrics' outcome label: one vocabulary, so
// that what a buyer was told and what the dashboard counts are the same word.
type Code string

// The codes. A domain error has exactly one (see CodeOf); the HTTP layer adds the codes of its
// own refusals (unauthorized, payload_too_large, …) and a status per code.
const (
	CodeAccepted       Code = "accepted"
	CodeInvalid        Code = "invalid_request"
	CodeNotFound       Code = "not_found"
	CodeSaleNotStarted Code = "sale_not_started"
	CodeSaleEnded      Code = "sale_ended"
	CodeSoldOut        Code = "sold_out"
	CodeLimitReached   Code = "limit_reached"
	CodeRateLimited    Code = "rate_limited"
	CodeUnavailable    Code = "unavailable"
	// The waiting room's refusals of a purchase (ErrPassMissing, ErrPassInvalid, ErrPassExpired).
	CodePassRequired Code = "admission_pass_required"
	CodePassInvalid  Code = "admission_pass_invalid"
	CodePassExpired  Code = "admission_pass_expired"
	// CodeUnconfirmed: decided on the Redis master, not yet on its replicas (ErrUnconfirmed).
	CodeUnconfirmed Code = "unconfirmed"
	// The order lifecycle's refusals (see lifecycle.go).
	CodeOrderNotConfirmed Code = "order_not_confirmed"
	CodeOrderExpired      Code = "order_expired"
	CodeOrderCancelled    Code = "order_cancelled"
	CodeOrderPaid         Code = "order_already_paid"
	CodeOrderRefused      Code = "order_refused"
	CodePaymentInProgress Code = "payment_in_progress"
	CodePaymentDeclined   Code = "payment_declined"
	CodeAmountOutOfRange  Code = "amount_out_of_range"
	// CodeInternal is the code of an error the domain does not know: a bug.
	CodeInternal Code = "internal"
)

// ErrorCode pairs an error with its code.
type ErrorCode struct {
	Err  error
	Code Code
}

// codeTable maps the domain's errors to their codes; the first match wins, so an error that wraps
// another (ErrBusy wraps ErrRateLimited) is listed by the one it wraps. Context errors mean the
// purchase was not decided in time: nothing was deducted, the caller may retry.
var codeTable = []ErrorCode{
	{ErrInvalid, CodeInvalid},
	{ErrNotFound, CodeNotFound},
	{ErrSaleNotStarted, CodeSaleNotStarted},
	{ErrSaleEnded, CodeSaleEnded},
	{ErrSoldOut, CodeSoldOut},
	{ErrLimitReached, CodeLimitReached},
	{ErrRateLimited, CodeRateLimited},
	{ErrPassMissing, CodePassRequired},
	{ErrPassInvalid, CodePassInvalid},
	{ErrPassExpired, CodePassExpired},
	{ErrUnavailable, CodeUnavailable},
	{ErrUnconfirmed, CodeUnconfirmed},
	{ErrOrderNotConfirmed, CodeOrderNotConfirmed},
	{ErrOrderExpired, CodeOrderExpired},
	{ErrOrderCancelled, CodeOrderCancelled},
	{ErrOrderPaid, CodeOrderPaid},
	{ErrOrderRefused, CodeOrderRefused},
	{ErrPaymentInProgress, CodePaymentInProgress},
	{ErrPaymentDeclined, CodePaymentDeclined},
	{ErrAmountOutOfRange, CodeAmountOutOfRange},
	{context.DeadlineExceeded, CodeUnavailable},
	{context.Canceled, CodeUnavailable},
}

// ErrorCodes returns the table CodeOf reads, in its order, for the HTTP layer to build its
// answers from.
func ErrorCodes() []ErrorCode { return append([]ErrorCode(nil), codeTable...) }

// CodeOf returns the code of err: CodeAccepted for nil, CodeInternal for an error of no entry.
func CodeOf(err error) Code {
	if err == nil {
		return CodeAccepted
	}
	for _, e := range codeTable {
		if err == e.Err {
			return e.Code
		}
	}
	for _, e := range codeTable {
		if errors.Is(err, e.Err) {
			return e.Code
		}
	}
	return CodeInternal
}
