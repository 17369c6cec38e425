package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/gin-gonic/gin"

	"github.com/seckill-go/seckill-go/api"
	"github.com/seckill-go/seckill-go/api/apitest"
	"github.com/seckill-go/seckill-go/internal/board"
	"github.com/seckill-go/seckill-go/internal/metrics"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/stampede"
	"github.com/seckill-go/seckill-go/internal/waitroom"
)

// The contract of api/openapi.yaml, checked both ways: the routes the gin router serves are the
// spec's operations, and the spec's error codes, status by status, are the ones the API answers
// with (apiCodes). Each comparison is also run on a planted difference, so that it is shown to
// fail.

// specRoute is a method and a path in the spec's spelling (/orders/{order_id}).
type specRoute struct{ Method, Path string }

func (r specRoute) String() string { return r.Method + " " + r.Path }

// outsideSpec are the routes the router serves that api/openapi.yaml leaves out, with why. A route
// listed here that the router stops serving, or that the spec starts describing, fails the test.
var outsideSpec = map[specRoute]string{
	{"GET", "/"}:                  "the storefront's page (HTML), not the API",
	{"GET", "/static/{filepath}"}: "the storefront's files, not the API",
	{"GET", "/metrics"}:           "Prometheus's text exposition format, described by Prometheus, not here",
	{"GET", "/api/openapi.yaml"}:  "the contract itself",
	{"GET", "/api/docs"}:          "the contract rendered for people (HTML)",
}

// TestOutsideSpecIsApitestOutside: apitest.Outside, which lets the end-to-end suites' answers
// of these paths through unchecked, says the same as outsideSpec: every path listed there is
// outside, and no path of the spec is.
func TestOutsideSpecIsApitestOutside(t *testing.T) {
	for r := range outsideSpec {
		if p := samplePath(r.Path); !apitest.Outside(p) {
			t.Errorf("%s is outside api/openapi.yaml here, but apitest.Outside(%q) is false", r, p)
		}
	}
	for path := range loadSpec(t).Paths.Map() {
		if p := samplePath(path); apitest.Outside(p) {
			t.Errorf("%s is in api/openapi.yaml, but apitest.Outside(%q) is true", path, p)
		}
	}
}

// samplePath is a path that path, in the spec's spelling, matches: each {param} as "1".
func samplePath(path string) string { return specParam.ReplaceAllString(path, "1") }

var specParam = regexp.MustCompile(`\{[^}/]+\}`)

// loadSpec loads api/openapi.yaml and validates it as OpenAPI 3.1.
func loadSpec(tb testing.TB) *openapi3.T {
	tb.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI())
	if err != nil {
		tb.Fatalf("loading api/openapi.yaml: %v", err)
	}
	if !doc.IsOpenAPI31OrLater() {
		tb.Fatalf("api/openapi.yaml is OpenAPI %s, want 3.1", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background()); err != nil {
		tb.Fatalf("api/openapi.yaml does not validate: %v", err)
	}
	return doc
}

// contractRouter is the real router with every optional route served: a route behind a nil
// dependency would not be compared at all (TestContractRouterServesRoutesGo catches one).
func contractRouter(tb testing.TB) *gin.Engine {
	tb.Helper()
	m := metrics.New()
	h, err := New(Deps{Log: slog.New(slog.DiscardHandler), Sales: fakeSales{}, Orders: contractOrders{}, Stampedes: noStampedes{},
		Board: boardOf(), HTTPMetrics: m, JWKS: []byte(`{"keys":[]}`), Queue: contractQueue{},
		JoinChallenge: contractChallenge{}, Challenges: contractChallenge{}}, Config{
		AdminToken: "secret", Metrics: m.Handler(), Web: fstest.MapFS{"index.html": {Data: []byte("<!doctype html>")}},
	})
	if err != nil {
		tb.Fatal(err)
	}
	e, ok := h.(*gin.Engine)
	if !ok {
		tb.Fatalf("New returned a %T, not the gin engine", h)
	}
	return e
}

// contractQueue makes the router serve the waiting rooms' routes; no room is ever asked.
type contractQueue struct{ Queue }

// routeLiteral finds the paths routes.go registers: get(g, "/path", …) and g.POST("/path", …).
var routeLiteral = regexp.MustCompile(`(?:\bget\(\w+, |\.(?:GET|HEAD|POST|PUT|PATCH|DELETE)\()"([^"]*)"`)

// unservedLiterals returns the paths that src registers and that end no route of routes: a route
// the router serves only with a dependency that contractRouter does not give.
func unservedLiterals(src string, routes gin.RoutesInfo) []string {
	var out []string
	for _, m := range routeLiteral.FindAllStringSubmatch(src, -1) {
		if !slices.ContainsFunc(routes, func(r gin.RouteInfo) bool { return strings.HasSuffix(r.Path, m[1]) }) {
			out = append(out, m[1])
		}
	}
	return out
}

// TestContractRouterServesRoutesGo: every path that routes.go registers is served by
// contractRouter, so that the comparison with the spec sees every route; a registration planted
// in the source is caught.
func TestContractRouterServesRoutesGo(t *testing.T) {
	src, err := os.ReadFile("routes.go")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(routeLiteral.FindAllString(string(src), -1)); n < 15 {
		t.Fatalf("found %d route registrations in routes.go: has their spelling changed?", n)
	}
	routes := contractRouter(t).Routes()
	if missing := unservedLiterals(string(src), routes); len(missing) > 0 {
		t.Errorf("routes.go registers %q, which contractRouter does not serve: give it the dependency that serves it", missing)
	}
	planted := string(src) + "\n\tif d.Planted != nil {\n\t\tv1.POST(\"/planted/:thing\", h.planted)\n\t}\n"
	if got := added(unservedLiterals(string(src), routes), unservedLiterals(planted, routes)); !slices.Equal(got, []string{"/planted/:thing"}) {
		t.Errorf("a planted registration: %q", got)
	}
}

// contractOrders makes the router serve the order lifecycle's routes; they are never called.
type contractOrders struct{}

func (contractOrders) Pay(context.Context, string, string, string) (sale.Order, error) {
	return sale.Order{}, sale.ErrNotFound
}

func (contractOrders) Cancel(context.Context, string, string) (sale.Order, error) {
	return sale.Order{}, sale.ErrNotFound
}

// servedRoutes turns gin's routes into the spec's spelling (:id and *filepath as {id} and
// {filepath}), each HEAD folded into its GET: the spec lists GETs only, and every GET answers
// HEAD (routes.go's get). A HEAD without its GET, or a GET without its HEAD, is a problem.
func servedRoutes(routes gin.RoutesInfo) (served []specRoute, problems []string) {
	byMethod := map[string]map[string]bool{}
	for _, r := range routes {
		parts := strings.Split(r.Path, "/")
		for i, p := range parts {
			if strings.HasPrefix(p, ":") || strings.HasPrefix(p, "*") {
				parts[i] = "{" + p[1:] + "}"
			}
		}
		path := strings.Join(parts, "/")
		if byMethod[r.Method] == nil {
			byMethod[r.Method] = map[string]bool{}
		}
		byMethod[r.Method][path] = true
	}
	for path := range byMethod[http.MethodHead] {
		if !byMethod[http.MethodGet][path] {
			problems = append(problems, "HEAD "+path+": served without its GET")
		}
	}
	for method, paths := range byMethod {
		if method == http.MethodHead {
			continue
		}
		for path := range paths {
			if method == http.MethodGet && !byMethod[http.MethodHead][path] {
				problems = append(problems, "GET "+path+": served without HEAD (routes.go's get serves both)")
			}
			served = append(served, specRoute{method, path})
		}
	}
	slices.Sort(problems)
	return served, problems
}

// specOperations are the spec's operations.
func specOperations(doc *openapi3.T) []specRoute {
	var out []specRoute
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			out = append(out, specRoute{strings.ToUpper(method), path})
		}
	}
	return out
}

// compareRoutes names every route served and not in the spec, every operation of the spec not
// served, and every exclusion that no longer holds.
func compareRoutes(served, spec []specRoute, outside map[specRoute]string) []string {
	var problems []string
	inSpec, isServed := map[specRoute]bool{}, map[specRoute]bool{}
	for _, r := range spec {
		inSpec[r] = true
	}
	for _, r := range served {
		isServed[r] = true
	}
	for r := range isServed {
		if _, ok := outside[r]; !ok && !inSpec[r] {
			problems = append(problems, r.String()+": served, but not in api/openapi.yaml")
		}
	}
	for r := range inSpec {
		if _, ok := outside[r]; ok {
			problems = append(problems, r.String()+": in api/openapi.yaml, but listed as outside it")
		}
		if !isServed[r] {
			problems = append(problems, r.String()+": in api/openapi.yaml, but not served")
		}
	}
	for r := range outside {
		if !isServed[r] {
			problems = append(problems, r.String()+": listed as outside api/openapi.yaml, but not served")
		}
	}
	slices.Sort(problems)
	return problems
}

func TestOpenAPIRoutes(t *testing.T) {
	served, problems := servedRoutes(contractRouter(t).Routes())
	problems = append(problems, compareRoutes(served, specOperations(loadSpec(t)), outsideSpec)...)
	if len(problems) > 0 {
		t.Errorf("the router and api/openapi.yaml differ:\n%s", strings.Join(problems, "\n"))
	}
}

// TestOpenAPIRoutesPlanted: the comparison fails on a route planted on a copy of the router, on a
// path removed from the spec, on a stale exclusion, and on an unpaired HEAD; each failure names
// the route. Only what each plant adds is compared, so that these pass whatever the real
// comparison finds (TestOpenAPIRoutes reports that).
func TestOpenAPIRoutesPlanted(t *testing.T) {
	doc := loadSpec(t)
	spec := specOperations(doc)
	served, _ := servedRoutes(contractRouter(t).Routes())
	base := compareRoutes(served, spec, outsideSpec)

	e := contractRouter(t)
	e.POST("/api/v1/planted/:thing", func(*gin.Context) {})
	planted, _ := servedRoutes(e.Routes())
	if got, want := added(base, compareRoutes(planted, spec, outsideSpec)), []string{"POST /api/v1/planted/{thing}: served, but not in api/openapi.yaml"}; !slices.Equal(got, want) {
		t.Errorf("a planted route: %q, want %q", got, want)
	}

	doc.Paths.Delete("/api/v1/orders/{order_id}/pay")
	if got, want := added(base, compareRoutes(served, specOperations(doc), outsideSpec)), []string{"POST /api/v1/orders/{order_id}/pay: served, but not in api/openapi.yaml"}; !slices.Equal(got, want) {
		t.Errorf("a removed path: %q, want %q", got, want)
	}

	stale := maps.Clone(outsideSpec)
	stale[specRoute{"GET", "/gone"}] = "planted"
	stale[specRoute{"GET", "/healthz"}] = "planted"
	if got, want := added(base, compareRoutes(served, spec, stale)), []string{
		"GET /gone: listed as outside api/openapi.yaml, but not served",
		"GET /healthz: in api/openapi.yaml, but listed as outside it",
	}; !slices.Equal(got, want) {
		t.Errorf("stale exclusions: %q, want %q", got, want)
	}

	e = contractRouter(t)
	_, base = servedRoutes(e.Routes())
	e.HEAD("/api/v1/head-only", func(*gin.Context) {})
	e.GET("/api/v1/get-only", func(*gin.Context) {})
	if _, got := servedRoutes(e.Routes()); !slices.Equal(added(base, got), []string{
		"GET /api/v1/get-only: served without HEAD (routes.go's get serves both)",
		"HEAD /api/v1/head-only: served without its GET",
	}) {
		t.Errorf("unpaired HEAD and GET: %q", added(base, got))
	}
}

// added returns the problems of got that are not in base.
func added(base, got []string) []string {
	var out []string
	for _, p := range got {
		if !slices.Contains(base, p) {
			out = append(out, p)
		}
	}
	return out
}

// specErrorCodes reads the spec's error answers: the ErrorCode enum, and each error response's
// status (its x-status) with the codes its schema allows. An operation that answers an error
// response under another status than its own is a problem.
func specErrorCodes(doc *openapi3.T) (enum []string, byStatus map[int][]string, problems []string) {
	for _, v := range doc.Components.Schemas["ErrorCode"].Value.Enum {
		enum = append(enum, fmt.Sprint(v))
	}
	byStatus = map[int][]string{}
	statusOf := map[string]int{}
	for name, r := range doc.Components.Responses {
		x, ok := r.Value.Extensions["x-status"]
		if !ok {
			continue
		}
		status, err := strconv.Atoi(fmt.Sprint(x))
		if err != nil {
			problems = append(problems, fmt.Sprintf("responses/%s: x-status %v is not a status", name, x))
			continue
		}
		statusOf["#/components/responses/"+name] = status
		codes, err := responseCodes(r.Value)
		if err != nil {
			problems = append(problems, fmt.Sprintf("responses/%s: %v", name, err))
		}
		byStatus[status] = append(byStatus[status], codes...)
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for key, r := range op.Responses.Map() {
				if want, ok := statusOf[r.Ref]; ok && key != strconv.Itoa(want) {
					problems = append(problems, fmt.Sprintf("%s %s: answers %s under %s", method, path, r.Ref, key))
				}
			}
		}
	}
	for s := range byStatus {
		slices.Sort(byStatus[s])
		byStatus[s] = slices.Compact(byStatus[s])
	}
	slices.Sort(problems)
	return enum, byStatus, problems
}

// responseCodes reads the codes an error response allows: its JSON schema is allOf the Error
// schema and a restriction of error.code to an enum.
func responseCodes(r *openapi3.Response) ([]string, error) {
	mt := r.Content.Get("application/json")
	if mt == nil || mt.Schema == nil || mt.Schema.Value == nil {
		return nil, fmt.Errorf("no application/json schema")
	}
	all := mt.Schema.Value.AllOf
	if len(all) != 2 || all[0].Ref != "#/components/schemas/Error" {
		return nil, fmt.Errorf("the schema is not allOf [Error, a code restriction]")
	}
	e := all[1].Value.Properties["error"]
	if e == nil || e.Value.Properties["code"] == nil {
		return nil, fmt.Errorf("the restriction is not of error.code")
	}
	var codes []string
	for _, v := range e.Value.Properties["code"].Value.Enum {
		codes = append(codes, fmt.Sprint(v))
	}
	if len(codes) == 0 {
		return nil, fmt.Errorf("error.code allows no code")
	}
	return codes, nil
}

// compareCodes names every code the API answers with that the ErrorCode enum lacks and every
// enum value the API never answers, then every status whose codes differ between the API and
// the spec's error responses.
func compareCodes(enum []string, specByStatus, apiByStatus map[int][]string) []string {
	var problems []string
	inEnum, answered := map[string]bool{}, map[string]bool{}
	for _, c := range enum {
		inEnum[c] = true
	}
	for _, codes := range apiByStatus {
		for _, c := range codes {
			answered[c] = true
		}
	}
	for c := range answered {
		if !inEnum[c] {
			problems = append(problems, "code "+c+": answered by the API, but not in the ErrorCode enum")
		}
	}
	for c := range inEnum {
		if !answered[c] {
			problems = append(problems, "code "+c+": in the ErrorCode enum, but never answered")
		}
	}
	for _, s := range slices.Sorted(maps.Keys(apiByStatus)) {
		if !slices.Equal(apiByStatus[s], specByStatus[s]) {
			problems = append(problems, fmt.Sprintf("status %d: the API answers %v, api/openapi.yaml allows %v", s, apiByStatus[s], specByStatus[s]))
		}
	}
	for _, s := range slices.Sorted(maps.Keys(specByStatus)) {
		if _, ok := apiByStatus[s]; !ok {
			problems = append(problems, fmt.Sprintf("status %d: api/openapi.yaml allows %v, the API never answers it", s, specByStatus[s]))
		}
	}
	slices.Sort(problems)
	return problems
}

func TestOpenAPIErrorCodes(t *testing.T) {
	enum, byStatus, problems := specErrorCodes(loadSpec(t))
	problems = append(problems, compareCodes(enum, byStatus, apiCodes())...)
	if len(problems) > 0 {
		t.Errorf("the error table and api/openapi.yaml differ:\n%s", strings.Join(problems, "\n"))
	}
}

// TestOpenAPIErrorCodesPlanted: the comparison fails on a planted enum value, a code the spec
// lacks, a code moved to another status, and an error response answered under another status
// than its own; only what each plant adds is compared.
func TestOpenAPIErrorCodesPlanted(t *testing.T) {
	doc := loadSpec(t)
	enum, byStatus, _ := specErrorCodes(doc)
	codes := apiCodes()
	base := compareCodes(enum, byStatus, codes)

	if got, want := added(base, compareCodes(append(slices.Clone(enum), "planted_code"), byStatus, codes)),
		[]string{"code planted_code: in the ErrorCode enum, but never answered"}; !slices.Equal(got, want) {
		t.Errorf("a planted enum value: %q, want %q", got, want)
	}

	planted := maps.Clone(codes)
	planted[http.StatusTeapot] = []string{"planted_code"}
	if got, want := added(base, compareCodes(enum, byStatus, planted)), []string{
		"code planted_code: answered by the API, but not in the ErrorCode enum",
		"status 418: the API answers [planted_code], api/openapi.yaml allows []",
	}; !slices.Equal(got, want) {
		t.Errorf("a code the spec lacks: %q, want %q", got, want)
	}

	moved := maps.Clone(byStatus)
	moved[http.StatusGone] = []string{"planted_code"}
	if got, want := added(base, compareCodes(enum, moved, codes)), []string{
		"status 410: api/openapi.yaml allows [planted_code], the API never answers it",
	}; !slices.Equal(got, want) {
		t.Errorf("a status the API never answers: %q, want %q", got, want)
	}
	sameAPI := maps.Clone(codes)
	sameAPI[http.StatusConflict] = slices.DeleteFunc(slices.Clone(codes[http.StatusConflict]), func(c string) bool { return c == "sold_out" })
	sameAPI[http.StatusGone] = []string{"sold_out"}
	if got := added(base, compareCodes(enum, byStatus, sameAPI)); len(got) != 2 ||
		!strings.HasPrefix(got[0], "status 409: the API answers") || !strings.HasPrefix(got[1], "status 410: the API answers [sold_out]") {
		t.Errorf("a code moved to another status: %q", got)
	}

	_, _, base = specErrorCodes(doc)
	op := doc.Paths.Value("/api/v1/products/{id}/purchase").Post
	op.Responses.Set("418", op.Responses.Status(http.StatusConflict))
	if _, _, got := specErrorCodes(doc); !slices.Equal(added(base, got), []string{"POST /api/v1/products/{id}/purchase: answers #/components/responses/Conflict under 418"}) {
		t.Errorf("an error response under the wrong status: %q", added(base, got))
	}
}

// TestOpenAPISchemasFitDTOs: the JSON shapes of dto.go validate against their schemas (JSON
// Schema 2020-12, as OpenAPI 3.1 reads them), and the same shape with a field planted does not:
// the answers' schemas are closed. kin-openapi's own validator, without EnableJSONSchema2020,
// ignores unevaluatedProperties, and lets the planted fields of the allOf schemas through. Which
// answer each route gives is the end-to-end suite's to check against the spec.
func TestOpenAPISchemasFitDTOs(t *testing.T) {
	doc := loadSpec(t)
	at := time.Date(2026, 11, 22, 20, 0, 0, 0, time.UTC)
	room := testProduct
	room.Admission = sale.AdmissionRule{Mode: sale.AdmissionWaitingRoom, AdmitRate: 2.5, MaxActive: 10, Session: time.Minute,
		AbandonAfter: 20 * time.Second}
	rates := &board.Rates{Start: at, Requests: []int64{1, 2}, Accepted: []int64{1, 0}}
	openSale, adminRoom := toProductJSON(testProduct), toProductJSON(room)
	openSale.State, adminRoom.State = "upcoming", "on_sale"
	publicRoom := publicProductJSON{adminRoom, viewerStatsJSON{InitialStock: 10, Stock: 4, SoldUnits: 6, ratesJSON: ratesOf(rates)}}
	publicRoom.Admission = publicRoom.Admission.public()
	finished := formatTimeMilli(at)
	strategies, err := toStrategiesJSON([]sale.Strategy{sale.StrategyMySQL})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		schema string
		value  any
	}{
		{"Product", openSale},
		{"Product", adminRoom},
		{"PublicProduct", publicRoom},
		{"PublicProduct", publicProductJSON{openSale, viewerStatsJSON{ratesJSON: ratesOf(nil)}}},
		{"ViewerStats", viewerStatsJSON{InitialStock: 10, Stock: 4, SoldUnits: 6, ratesJSON: ratesOf(rates)}},
		{"Audit", statsJSON{InitialStock: 10, Stock: 4, Reserved: 6, ratesJSON: ratesOf(nil)}},
		{"EventItem", eventItemJSON{Product: adminRoom, Stats: publicRoom.Stats}},
		{"Receipt", toReceiptJSON(sale.Receipt{OrderID: "o-1", Status: sale.StatusQueued, ProductID: 7, UserID: "alice", Quantity: 1, Strategy: sale.StrategyMySQL})},
		{"Order", toOrderJSON(sale.Order{OrderID: "o-1", Status: sale.StatusPaid, ProductID: 7, UserID: "alice", Quantity: 1, AmountCents: 700,
			OrderTimes: sale.OrderTimes{ExpiresAt: at, PaidAt: at, PaymentID: "pay-1"}})},
		{"Order", toOrderJSON(sale.Order{OrderID: "o-2", Status: sale.StatusRefused, Refusal: sale.CodeSoldOut, ProductID: 7, UserID: "alice", Quantity: 1})},
		{"Stampede", toStampedeJSON(stampede.Progress{ID: "s1", ProductID: 7, Buyers: 3, Running: true, StartedAt: at})},
		{"Stampede", stampedeJSON{StampedeID: "s1", ProductID: 7, Targets: []string{"http://127.0.0.1:8081"}, StartedAt: finished, FinishedAt: &finished}},
		{"Strategy", strategies.Strategies[0]},
		{"Ticket", toTicketJSON(7, waitroom.Ticket{SaleID: "7.1", Status: waitroom.Status{State: waitroom.Waiting, Ticket: 17, Served: 3, OpensAt: at},
			Wait: 1500 * time.Millisecond, WaitKnown: true, PollAfter: time.Second})},
		{"Ticket", toTicketJSON(7, waitroom.Ticket{SaleID: "7.1", Status: waitroom.Status{State: waitroom.Admitted, Ticket: 17, Served: 20, OpensAt: at,
			SessionEnds: at.Add(time.Minute)}, Pass: "a.b.c", PassExpires: at.Add(time.Minute), PollAfter: time.Minute})},
		{"Error", errorBody{Error: errorDetail{Code: string(sale.CodeSoldOut), Message: "sold out"}}},
	} {
		t.Run(tc.schema, func(t *testing.T) {
			schema := doc.Components.Schemas[tc.schema].Value
			var v map[string]any
			if err := json.Unmarshal(mustJSON(tc.value), &v); err != nil {
				t.Fatal(err)
			}
			if err := schema.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
				t.Errorf("%s does not fit %s: %v", mustJSON(tc.value), tc.schema, err)
			}
			v["planted_field"] = 1
			if err := schema.VisitJSON(v, openapi3.EnableJSONSchema2020()); err == nil {
				t.Errorf("%s with a planted field fits %s", mustJSON(tc.value), tc.schema)
			}
		})
	}
}
