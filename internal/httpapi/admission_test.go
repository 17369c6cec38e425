package httpapi

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// adminAuth is the admin's header for memRouter.
var adminAuth = map[string]string{"Authorization": "Bearer " + fuzzAdminToken}

// decodeAdmission returns the "admission" of the product JSON body.
func decodeAdmission(tb testing.TB, body string) map[string]any {
	tb.Helper()
	var p struct {
		ID        int64          `json:"id"`
		Admission map[string]any `json:"admission"`
	}
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		tb.Fatalf("%s: %v", body, err)
	}
	return p.Admission
}

// TestAdmissionThroughTheAPI: a product created with a waiting room answers it whole to the
// admin and in part to the public reads; a reset without admission keeps it, one with admission
// replaces it; a product created without one is open.
func TestAdmissionThroughTheAPI(t *testing.T) {
	h := memRouter(t)
	start := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	startAt, opensAt := start.Format(time.RFC3339), start.Add(-10*time.Minute).Format(time.RFC3339)
	res := serve(h, "POST", "/api/v1/admin/products", `{"name":"queued","price_cents":1,"stock":5,"sale_starts_at":"`+startAt+`",`+
		`"admission":{"mode":"waiting_room","admit_rate":50,"max_active":200,"session_seconds":120,"queue_opens_at":"`+opensAt+`",`+
		`"shuffle":true,"abandon_seconds":20}}`, adminAuth)
	if res.Status != 201 {
		t.Fatalf("create: %d %s", res.Status, res.Body)
	}
	full := map[string]any{"mode": "waiting_room", "admit_rate": 50.0, "max_active": 200.0, "session_seconds": 120.0,
		"queue_opens_at": opensAt, "shuffle": true, "abandon_seconds": 20.0}
	if diff := cmp.Diff(full, decodeAdmission(t, res.Body)); diff != "" {
		t.Errorf("created (-want +got):\n%s", diff)
	}
	var created productJSON
	if err := json.Unmarshal([]byte(res.Body), &created); err != nil {
		t.Fatal(err)
	}
	path := "/api/v1/products/" + strconv.FormatInt(created.ID, 10)
	public := map[string]any{"mode": "waiting_room", "admit_rate": 50.0, "queue_opens_at": opensAt}
	if diff := cmp.Diff(public, decodeAdmission(t, serve(h, "GET", path, "", nil).Body)); diff != "" {
		t.Errorf("public read (-want +got):\n%s", diff)
	}
	list := serve(h, "GET", "/api/v1/admin/products", "", adminAuth)
	if !strings.Contains(list.Body, `"admission":{"mode":"waiting_room","admit_rate":50,"max_active":200,"session_seconds":120,`) {
		t.Errorf("the admin list does not show the whole rule: %s", list.Body)
	}

	reset := path[len("/api/v1"):]
	for _, tc := range []struct {
		name, body string
		want       map[string]any
	}{
		{"kept", `{"stock":3}`, full},
		{"kept on null", `{"stock":3,"admission":null}`, full},
		{"changed, opening with the sale", `{"stock":3,"admission":{"mode":"waiting_room","admit_rate":0.5,"max_active":1,"session_seconds":1,"abandon_seconds":3600}}`,
			map[string]any{"mode": "waiting_room", "admit_rate": 0.5, "max_active": 1.0, "session_seconds": 1.0,
				"queue_opens_at": startAt, "shuffle": false, "abandon_seconds": 3600.0}},
		{"opened", `{"stock":3,"admission":{"mode":"open","admit_rate":-1}}`, map[string]any{"mode": "open"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := serve(h, "POST", "/api/v1/admin"+reset+"/reset", tc.body, adminAuth)
			if res.Status != 200 {
				t.Fatalf("reset: %d %s", res.Status, res.Body)
			}
			if diff := cmp.Diff(tc.want, decodeAdmission(t, res.Body)); diff != "" {
				t.Errorf("after the reset (-want +got):\n%s", diff)
			}
		})
	}

	plain := serve(h, "POST", "/api/v1/admin/products", `{"name":"plain","price_cents":1,"stock":5}`, adminAuth)
	if diff := cmp.Diff(map[string]any{"mode": "open"}, decodeAdmission(t, plain.Body)); plain.Status != 201 || diff != "" {
		t.Errorf("created without admission: %d (-want +got):\n%s", plain.Status, diff)
	}
}

// TestAdmissionRefusals: every bad admission field, in a create and in a reset, is a 400 that
// names it, never a 5xx.
func TestAdmissionRefusals(t *testing.T) {
	h := memRouter(t)
	start := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	valid := map[string]string{"mode": `"waiting_room"`, "admit_rate": "50", "max_active": "200", "session_seconds": "120",
		"queue_opens_at": `"` + start.Add(-time.Minute).Format(time.RFC3339) + `"`, "shuffle": "true", "abandon_seconds": "20"}
	order := []string{"mode", "admit_rate", "max_active", "session_seconds", "queue_opens_at", "shuffle", "abandon_seconds"}
	// with is the valid admission object with field set to value ("" leaves it out).
	with := func(field, value string) string {
		var parts []string
		for _, k := range order {
			v := valid[k]
			if k == field {
				v = value
			}
			if v != "" {
				parts = append(parts, `"`+k+`":`+v)
			}
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	tests := []struct {
		name, admission, field string
	}{
		{"not an object", `[1]`, "admission"},
		{"a string", `"waiting_room"`, "admission"},
		{"unknown field", `{"mode":"open","rate":1}`, "admission.rate"},
		{"field in capitals", `{"MODE":"open"}`, "admission.MODE"},
		{"no mode", with("mode", ""), "admission.mode"},
		{"unknown mode", with("mode", `"lottery"`), "admission.mode"},
		{"mode in capitals", with("mode", `"WAITING_ROOM"`), "admission.mode"},
		{"mode not a string", with("mode", `1`), "admission.mode"},
		{"no rate", with("admit_rate", ""), "admission.admit_rate"},
		{"zero rate", with("admit_rate", "0"), "admission.admit_rate"},
		{"negative rate", with("admit_rate", "-1"), "admission.admit_rate"},
		{"rate too high", with("admit_rate", "100001"), "admission.admit_rate"},
		{"rate out of float range", with("admit_rate", "1e400"), "admission.admit_rate"},
		{"rate a string", with("admit_rate", `"50"`), "admission.admit_rate"},
		{"no max active", with("max_active", ""), "admission.max_active"},
		{"zero max active", with("max_active", "0"), "admission.max_active"},
		{"max active too high", with("max_active", "1000000001"), "admission.max_active"},
		{"max active not whole", with("max_active", "1.5"), "admission.max_active"},
		{"max active beyond int64", with("max_active", "99999999999999999999"), "admission.max_active"},
		{"no session", with("session_seconds", ""), "admission.session_seconds"},
		{"zero session", with("session_seconds", "0"), "admission.session_seconds"},
		{"session too long", with("session_seconds", "3601"), "admission.session_seconds"},
		{"session overflowing a duration", with("session_seconds", "9223372036854775807"), "admission.session_seconds"},
		{"negative session overflowing", with("session_seconds", "-9223372036854775808"), "admission.session_seconds"},
		{"no abandon timeout", with("abandon_seconds", ""), "admission.abandon_seconds"},
		{"zero abandon timeout", with("abandon_seconds", "0"), "admission.abandon_seconds"},
		{"abandon timeout too long", with("abandon_seconds", "3601"), "admission.abandon_seconds"},
		{"opening not a time", with("queue_opens_at", `"soon"`), "admission.queue_opens_at"},
		{"opening out of range", with("queue_opens_at", `"0999-01-01T00:00:00Z"`), "admission.queue_opens_at"},
		{"opening after the start", with("queue_opens_at", `"`+start.Add(time.Second).Format(time.RFC3339)+`"`), "admission.queue_opens_at"},
		{"shuffle not a boolean", with("shuffle", `"yes"`), "admission.shuffle"},
	}
	window := `"sale_starts_at":"` + start.Format(time.RFC3339) + `","sale_ends_at":"` + start.Add(time.Hour).Format(time.RFC3339) + `"`
	for _, tc := range tests {
		for _, req := range []struct{ kind, path, body string }{
			{"create", "/api/v1/admin/products", `{"name":"n","price_cents":1,"stock":1,` + window + `,"admission":` + tc.admission + `}`},
			{"reset", "/api/v1/admin/products/" + strconv.Itoa(productOpen) + "/reset", `{"stock":1,` + window + `,"admission":` + tc.admission + `}`},
		} {
			t.Run(req.kind+"/"+tc.name, func(t *testing.T) {
				res := serve(h, "POST", req.path, req.body, adminAuth)
				var got errorBody
				if err := json.Unmarshal([]byte(res.Body), &got); err != nil || res.Status != 400 || got.Error.Code != "invalid_request" {
					t.Fatalf("%s: %d %s, want 400 invalid_request", req.body, res.Status, res.Body)
				}
				if !strings.HasPrefix(got.Error.Message, tc.field+": ") {
					t.Errorf("message %q does not name %s", got.Error.Message, tc.field)
				}
			})
		}
	}
}

// TestResetMovingTheSaleBeforeAKeptOpening: a reset that moves the sale before the queue
// opening it would keep is a 400 naming admission.queue_opens_at, and changes nothing.
func TestResetMovingTheSaleBeforeAKeptOpening(t *testing.T) {
	h := memRouter(t)
	start := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	res := serve(h, "POST", "/api/v1/admin/products", `{"name":"q","price_cents":1,"stock":5,"sale_starts_at":"`+start.Format(time.RFC3339)+`",`+
		`"admission":{"mode":"waiting_room","admit_rate":1,"max_active":1,"session_seconds":60,"abandon_seconds":60,`+
		`"queue_opens_at":"`+start.Add(-time.Minute).Format(time.RFC3339)+`"}}`, adminAuth)
	var p productJSON
	if err := json.Unmarshal([]byte(res.Body), &p); res.Status != 201 || err != nil {
		t.Fatalf("create: %d %s", res.Status, res.Body)
	}
	earlier := start.Add(-time.Hour)
	res = serve(h, "POST", "/api/v1/admin/products/"+strconv.FormatInt(p.ID, 10)+"/reset", `{"stock":1,"sale_starts_at":"`+
		earlier.Format(time.RFC3339)+`","sale_ends_at":"`+start.Format(time.RFC3339)+`"}`, adminAuth)
	if res.Status != 400 || !strings.Contains(res.Body, `"message":"admission.queue_opens_at: `) {
		t.Fatalf("reset: %d %s, want 400 naming admission.queue_opens_at", res.Status, res.Body)
	}
	after := serve(h, "GET", "/api/v1/products/"+strconv.FormatInt(p.ID, 10), "", nil)
	var got productJSON
	if err := json.Unmarshal([]byte(after.Body), &got); err != nil || got.Stock != 5 || got.SaleStartsAt != p.SaleStartsAt {
		t.Errorf("after the refused reset: %s", after.Body)
	}
}
