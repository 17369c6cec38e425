// Package apitest holds the app's answers to api/openapi.yaml: the tests that talk to the real
// app hand every answer they get to Check (apptest.Client for the end-to-end suites,
// httpapi.CheckAnswer for the fuzz targets), so that an undocumented route, status, header
// value, field or error code fails the test that met it. It is for tests; the app never imports it.
package apitest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/seckill-go/seckill-go/api"
)

// Validator checks answers against one spec.
type Validator struct {
	router   routers.Router
	notFound *openapi3.Response // an unknown path's 404
	noMethod *openapi3.Response // a known path's unknown method: 405
	// anyRoute are the responses any route may answer (x-any-route: true), by their x-status.
	anyRoute map[int]*openapi3.ResponseRef
}

// Outside says whether the API's contract leaves the path out: the storefront's page and
// files, /metrics (Prometheus's format), and the contract itself with its page for people
// (/api/openapi.yaml, /api/docs). Its answers are not the spec's to check. It says what
// internal/httpapi's outsideSpec lists, which a test there holds it to.
func Outside(path string) bool {
	switch path {
	case "/", "/metrics", "/api/openapi.yaml", "/api/docs":
		return true
	}
	return strings.HasPrefix(path, "/static/")
}

var (
	defaultOnce sync.Once
	defaultV    *Validator
	defaultErr  error
)

// Default is the validator of api/openapi.yaml, loaded once per test binary.
func Default() (*Validator, error) {
	defaultOnce.Do(func() { defaultV, defaultErr = New(api.OpenAPI()) })
	return defaultV, defaultErr
}

// New loads spec (OpenAPI 3.1 YAML or JSON). The spec's servers are dropped: an answer is
// matched by its path alone, whatever address the test's app listens on.
func New(spec []byte) (*Validator, error) {
	doc, err := openapi3.NewLoader().LoadFromData(spec)
	if err != nil {
		return nil, fmt.Errorf("apitest: loading the spec: %w", err)
	}
	doc.Servers = nil
	r, err := legacy.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("apitest: %w", err)
	}
	v := &Validator{router: r, anyRoute: map[int]*openapi3.ResponseRef{}}
	if doc.Components != nil {
		if ref := doc.Components.Responses["NotFound"]; ref != nil {
			v.notFound = ref.Value
		}
		if ref := doc.Components.Responses["MethodNotAllowed"]; ref != nil {
			v.noMethod = ref.Value
		}
		for name, ref := range doc.Components.Responses {
			if ref.Value == nil || ref.Value.Extensions["x-any-route"] != true {
				continue
			}
			status, ok := ref.Value.Extensions["x-status"].(float64)
			if !ok {
				return nil, fmt.Errorf("apitest: responses/%s is x-any-route without an x-status", name)
			}
			v.anyRoute[int(status)] = ref
		}
	}
	if v.notFound == nil || v.noMethod == nil {
		return nil, errors.New("apitest: the spec has no components.responses NotFound and MethodNotAllowed")
	}
	return v, nil
}

// Check holds one answer to the spec: the request's method and target (path and query, as
// sent), the answer's status, headers and body. A path outside the contract (Outside) passes;
// a path the spec does not know must be answered 404 as components.responses.NotFound says, a
// method it does not know on a path it does, 405 as MethodNotAllowed says; any other answer
// must be one its operation documents: the status (a 304 included: its headers are checked, the
// library skips them), every documented header's value, the body's media type and its schema,
// fields and error codes (the spec's objects are closed: additionalProperties false).
func (v *Validator) Check(method, target string, status int, header http.Header, body []byte) error {
	u, err := url.ParseRequestURI(target)
	if err != nil {
		u = &url.URL{Path: target} // a fuzzed path: matched as it is
	}
	if Outside(u.Path) {
		return nil
	}
	// Built by hand: a fuzzed method (empty, not a token) is matched as it is, to no route.
	req := &http.Request{Method: method, URL: u, Header: http.Header{}}
	if method == http.MethodHead {
		// The app serves HEAD wherever it serves GET, which the spec describes: a HEAD's answer
		// is the GET's status and headers, without the body.
		req.Method = http.MethodGet
	}
	route, params, err := v.router.FindRoute(req)
	if err == nil && !exactMatch(route.Path, u.Path) {
		err = routers.ErrPathNotFound // the router's tolerance (a trailing slash) is not the app's
	}
	if err != nil {
		var re *routers.RouteError
		if !errors.As(err, &re) {
			return fmt.Errorf("apitest: %s %s: %w", method, target, err)
		}
		if v.knownPath(u) {
			return v.checkFallback(v.noMethod, http.StatusMethodNotAllowed, method, target, status, header, body)
		}
		return v.checkFallback(v.notFound, http.StatusNotFound, method, target, status, header, body)
	}
	if route.Operation.Responses.Status(status) == nil && v.anyRoute[status] != nil {
		// A status any route may answer: checked against its own response, as for another path.
		return v.checkFallback(v.anyRoute[status].Value, status, method, target, status, header, body)
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 status,
		Header:                 header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	in.SetBodyBytes(body)
	if err := v.checkUnvalidated(route, status, header); err != nil {
		return fmt.Errorf("apitest: %s %s: %d: %w", method, target, status, err)
	}
	if method == http.MethodHead || status == http.StatusNotModified {
		return nil
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		return fmt.Errorf("apitest: %s %s: %d %s: %w", method, target, status, clip(body), err)
	}
	return nil
}

// exactMatch says whether path is the spec's template as the app's router matches it: as many
// segments, each the same or, for a {parameter}, anything — but empty as the last segment (gin
// routes /a//b to /a/{p}/b, whose handler refuses the empty value with a 400, and answers /a/
// with a 404, not with /a/{p}'s handler; kin-openapi's router takes /a/ for /a).
func exactMatch(template, path string) bool {
	ts, ps := strings.Split(template, "/"), strings.Split(path, "/")
	if len(ts) != len(ps) {
		return false
	}
	for i, t := range ts {
		if strings.HasPrefix(t, "{") && strings.HasSuffix(t, "}") {
			if ps[i] == "" && i == len(ts)-1 {
				return false
			}
		} else if t != ps[i] {
			return false
		}
	}
	return true
}

// knownPath says whether some operation of the spec serves u's path, by any method. (The
// router's own "method not allowed" misses templated paths.)
func (v *Validator) knownPath(u *url.URL) bool {
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions} {
		req := &http.Request{Method: m, URL: u, Header: http.Header{}}
		if route, _, err := v.router.FindRoute(req); err == nil && exactMatch(route.Path, u.Path) {
			return true
		}
	}
	return false
}

// checkUnvalidated checks what ValidateResponse skips: that a 304 (never validated there) and
// a HEAD's answer have a status the operation documents, with its documented headers.
func (v *Validator) checkUnvalidated(route *routers.Route, status int, header http.Header) error {
	ref := route.Operation.Responses.Status(status)
	if ref == nil {
		ref = route.Operation.Responses.Default()
	}
	if ref == nil || ref.Value == nil {
		return fmt.Errorf("status %d is not documented for %s %s", status, route.Method, route.Path)
	}
	for name, h := range ref.Value.Headers {
		if h.Value != nil && h.Value.Required && header.Get(name) == "" {
			return fmt.Errorf("no %s header, which the spec requires", name)
		}
	}
	return nil
}

// checkFallback checks the answer to a route the spec does not know against the response the
// spec gives such a request.
func (v *Validator) checkFallback(resp *openapi3.Response, want int, method, target string, status int, header http.Header, body []byte) error {
	if status != want {
		return fmt.Errorf("apitest: %s %s is no route of the spec, yet answered %d (want %d): %s", method, target, status, want, clip(body))
	}
	if method == http.MethodHead {
		return nil
	}
	mt := resp.Content.Get(header.Get("Content-Type"))
	if mt == nil || mt.Schema == nil {
		return fmt.Errorf("apitest: %s %s: %d with Content-Type %q, which the spec does not give it", method, target, status, header.Get("Content-Type"))
	}
	val, err := decodeJSON(body)
	if err != nil {
		return fmt.Errorf("apitest: %s %s: %d: %w", method, target, status, err)
	}
	if err := mt.Schema.Value.VisitJSON(val, openapi3.EnableJSONSchema2020(), openapi3.VisitAsResponse(), openapi3.MultiErrors()); err != nil {
		return fmt.Errorf("apitest: %s %s: %d %s: %w", method, target, status, clip(body), err)
	}
	return nil
}

func decodeJSON(body []byte) (any, error) {
	dec := openapi3filter.RegisteredBodyDecoder("application/json")
	if dec == nil {
		return nil, errors.New("no JSON body decoder registered")
	}
	return dec(bytes.NewReader(body), http.Header{}, &openapi3.SchemaRef{Value: openapi3.NewObjectSchema()}, nil)
}

// clip is the body for an error message: at most 300 bytes.
func clip(body []byte) string {
	if len(body) > 300 {
		return fmt.Sprintf("%q…", body[:300])
	}
	return fmt.Sprintf("%q", body)
}
