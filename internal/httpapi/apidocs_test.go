package httpapi

import (
	"bytes"
	"html"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/seckill-go/seckill-go/api"
	"github.com/seckill-go/seckill-go/internal/metrics"
	"github.com/seckill-go/seckill-go/web"
)

// TestAPIDocsSpec: /api/openapi.yaml answers the embedded spec byte for byte, as YAML, under
// an ETag that If-None-Match turns into a 304 without a body.
func TestAPIDocsSpec(t *testing.T) {
	h := contractRouter(t)
	got := serve(h, "GET", "/api/openapi.yaml", "", nil, "Content-Type", "Cache-Control", "Content-Security-Policy")
	if got.Status != http.StatusOK || got.Body != string(api.OpenAPI()) {
		t.Fatalf("GET /api/openapi.yaml = %d, %d bytes; want 200 and the %d bytes of api.OpenAPI()", got.Status, len(got.Body), len(api.OpenAPI()))
	}
	want := map[string]string{"Content-Type": "application/yaml", "Cache-Control": "no-cache", "Content-Security-Policy": apiCSP[0]}
	if diff := cmp.Diff(want, got.Headers); diff != "" {
		t.Errorf("headers (-want +got):\n%s", diff)
	}
	checkConditional(t, h, "/api/openapi.yaml")
}

// TestAPIDocsPage: /api/docs is an HTML page under the page's policy, with an ETag, that names
// every operation of the spec with its method and path, and needs no script or inline style
// (the policy would block both) and no file the storefront does not have.
func TestAPIDocsPage(t *testing.T) {
	h := contractRouter(t)
	got := serve(h, "GET", "/api/docs", "", nil, "Content-Type", "Cache-Control", "Content-Security-Policy", "X-Frame-Options")
	if got.Status != http.StatusOK {
		t.Fatalf("GET /api/docs = %d, want 200", got.Status)
	}
	want := map[string]string{"Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-cache",
		"Content-Security-Policy": pageCSP[0], "X-Frame-Options": "DENY"}
	if diff := cmp.Diff(want, got.Headers); diff != "" {
		t.Errorf("headers (-want +got):\n%s", diff)
	}
	page := got.Body
	for _, bad := range []string{"<script", "style="} {
		if strings.Contains(strings.ToLower(page), bad) {
			t.Errorf("the page has %q", bad)
		}
	}
	if m := regexp.MustCompile(`(?i)(?:src|href)="(?:[a-z]+:)?//[^"]*"`).FindAllString(page, -1); len(m) > 0 {
		t.Errorf("the page refers to other origins: %q", m)
	}
	doc := loadSpec(t)
	n := 0
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			n++
			heading := `<article id="` + html.EscapeString(op.OperationID) + `">` + "\n" + `<h3><span class="method">` +
				strings.ToUpper(method) + `</span> <code class="path">` + html.EscapeString(path) + `</code></h3>`
			if !strings.Contains(page, heading) {
				t.Errorf("the page has no %s %s (%s): want %q", strings.ToUpper(method), path, op.OperationID, heading)
			}
		}
	}
	if got := strings.Count(page, "<article "); got != n {
		t.Errorf("the page has %d operations, the spec %d", got, n)
	}
	for _, m := range regexp.MustCompile(`(?:href|src)="/static/([^"]+)"`).FindAllStringSubmatch(page, -1) {
		if _, err := fs.Stat(web.FS(), m[1]); err != nil {
			t.Errorf("the page loads /static/%s, which the storefront does not have", m[1])
		}
	}
	checkConditional(t, h, "/api/docs")
}

// checkConditional holds path's answer to its ETag: a request that names it is a 304 with the
// same tag and no body, and a HEAD, over a real connection, the GET's headers without the body.
func checkConditional(t *testing.T, h http.Handler, path string) {
	t.Helper()
	get := serve(h, "GET", path, "", nil, "ETag", "Content-Type")
	tag := get.Headers["ETag"]
	if !strings.HasPrefix(tag, `"`) {
		t.Fatalf("GET %s: ETag %q, want a strong tag", path, tag)
	}
	for _, inm := range []string{tag, "W/" + tag, `"other", ` + tag} {
		got := serve(h, "GET", path, "", map[string]string{"If-None-Match": inm}, "ETag")
		if got.Status != http.StatusNotModified || got.Body != "" || got.Headers["ETag"] != tag {
			t.Errorf("GET %s with If-None-Match %s = %d, ETag %q, %d bytes; want 304, the tag, no body", path, inm, got.Status, got.Headers["ETag"], len(got.Body))
		}
	}
	if got := serve(h, "GET", path, "", map[string]string{"If-None-Match": `"other"`}); got.Status != http.StatusOK || got.Body != get.Body {
		t.Errorf("GET %s with another tag = %d, want 200 and the body", path, got.Status)
	}

	srv := httptest.NewServer(h)
	defer srv.Close()
	res, err := http.Head(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK || len(body) != 0 || res.Header.Get("ETag") != tag || res.Header.Get("Content-Type") != get.Headers["Content-Type"] {
		t.Errorf("HEAD %s = %d, ETag %q, Content-Type %q, %d bytes; want 200 with the GET's headers and no body",
			path, res.StatusCode, res.Header.Get("ETag"), res.Header.Get("Content-Type"), len(body))
	}
}

// TestAPIDocsBrokenSpec: a spec that does not load, or loads and does not validate, is an
// error when the answers are made (New's), never at a request.
func TestAPIDocsBrokenSpec(t *testing.T) {
	valid := []byte("openapi: 3.1.0\ninfo: {title: t, version: v1}\npaths:\n  /x:\n    get:\n      operationId: x\n      responses:\n        '200': {description: ok}\n")
	d, err := newAPIDocs(valid)
	if err != nil {
		t.Fatalf("a valid spec: %v", err)
	}
	if !bytes.Contains(d.page.body, []byte(`<article id="x">`)) {
		t.Errorf("a valid spec's page lacks its operation:\n%s", d.page.body)
	}
	for name, spec := range map[string]string{
		"not YAML":              "openapi: 3.1.0\npaths: [",
		"a dangling $ref":       strings.Replace(string(valid), "{description: ok}", "{$ref: '#/components/responses/Gone'}", 1),
		"an operation id twice": string(valid) + "  /y:\n    get:\n      operationId: x\n      responses:\n        '200': {description: ok}\n",
		"not OpenAPI at all":    "just: text\n",
	} {
		if _, err := newAPIDocs([]byte(spec)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestAPIDocsNotOnWorker: the worker, which serves no API, serves no contract either.
func TestAPIDocsNotOnWorker(t *testing.T) {
	m := metrics.New()
	h, err := New(Deps{Log: slog.New(slog.DiscardHandler), HTTPMetrics: m}, Config{OpsOnly: true, Metrics: m.Handler()})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/api/openapi.yaml", "/api/docs"} {
		if got := serve(h, "GET", path, "", nil); got.Status != http.StatusNotFound {
			t.Errorf("the worker's GET %s = %d, want 404", path, got.Status)
		}
	}
}
