// Package api holds the HTTP API's contract: api/openapi.yaml, OpenAPI 3.1, embedded so that the
// app can serve it and tests can hold the router to it. It describes the API and must never
// implement any of it: the routes are internal/httpapi's.
package api

import (
	"bytes"
	_ "embed"
)

//go:embed openapi.yaml
var openAPI []byte

// OpenAPI returns api/openapi.yaml: every route of the API but the storefront's pages and
// /metrics, with its bodies, statuses, headers and error codes. Each call returns a copy.
func OpenAPI() []byte { return bytes.Clone(openAPI) }
