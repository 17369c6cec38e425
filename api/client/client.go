// Package client is a typed Go client of the API, generated from its contract (api/openapi.yaml)
// by oapi-codegen into client.gen.go: the operations of ClientWithResponses, named by their
// operationId, and the contract's schemas as Go types. It must never be edited by hand but for
// this file: change the contract or oapi-codegen.yaml and run `go generate ./api/client`;
// TestGeneratedClientIsFresh fails until the checked-in file is what the generator makes.
//
// The generator reads the contract through overlay.yaml, which says what it changes and why.
package client

//go:generate go tool -modfile=../../tools.mod oapi-codegen -config oapi-codegen.yaml -o client.gen.go ../openapi.yaml

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// New returns the client of the API at server (a base URL; a path in it is a prefix), sending
// through doer, with token, if not "", as the bearer token of every request. It is
// NewClientWithResponses with those options, which cannot fail.
func New(server string, doer HttpRequestDoer, token string) *ClientWithResponses {
	c := &Client{Server: strings.TrimSuffix(server, "/") + "/", Client: doer}
	if token != "" {
		c.RequestEditors = []RequestEditorFn{func(_ context.Context, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer "+token)
			return nil
		}}
	}
	return &ClientWithResponses{ClientInterface: c}
}

// APIError is an error answer of the API, {"error":{"code","message"}}, with its status.
type APIError struct {
	Status  int
	Code    ErrorCode
	Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

// ErrorOf returns the error of an answer its caller did not want, from the response and the
// body the generated client read: an *APIError when the body is the API's error, else an error
// that gives the status and the start of the body (a proxy's page, say).
func ErrorOf(rsp *http.Response, body []byte) error {
	var e Error
	if err := json.Unmarshal(body, &e); err == nil && e.Error.Code != "" {
		return &APIError{Status: rsp.StatusCode, Code: e.Error.Code, Message: e.Error.Message}
	}
	const max = 200
	if len(body) > max {
		body = body[:max]
	}
	return fmt.Errorf("%s %s: %s: %q", rsp.Request.Method, rsp.Request.URL.Redacted(), rsp.Status, body)
}
