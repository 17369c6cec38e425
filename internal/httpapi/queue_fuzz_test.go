package httpapi_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/apptest"
	"github.com/seckill-go/seckill-go/internal/httpapi"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/waitroom/admit"
)

// The fuzz targets of the waiting room's inputs, against the real app over the real services
// (Redis keeps the rooms): the queue's routes (join and poll) and a purchase's Admission-Pass
// header. Each fuzzing process starts one app on a database of its own, with a pass key the
// target knows, so that it can tell a genuine pass from any other.

// roomApp is an app under fuzzing with a waiting-room sale on (a billion units, one per user),
// one whose queue opens in an hour, and an open sale; sign signs genuine passes of its key.
type roomApp struct {
	fuzzApp
	room, later int64
	signer      *admit.Signer
	verifier    *admit.Verifier
	// accepted counts the purchases this process's app accepted: its reservations, exactly.
	accepted atomic.Int64
}

func startRoomApp(f *testing.F) *roomApp {
	f.Helper()
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = byte(i*7 + 1)
	}
	signer, err := admit.NewSigner(ed25519.NewKeyFromSeed(seed))
	if err != nil {
		f.Fatal(err)
	}
	verifier, err := admit.NewVerifier(signer.Public())
	if err != nil {
		f.Fatal(err)
	}
	a := apptest.NewStack(f).Start(f, map[string]string{"SECKILL_WAITROOM_KEY": base64.StdEncoding.EncodeToString(seed)})
	admin := apptest.Client{URL: a.URL, Token: apptest.AdminToken}
	room := map[string]any{"mode": "waiting_room", "admit_rate": 1000, "max_active": 1_000_000, "session_seconds": 600, "abandon_seconds": 600}
	product := map[string]any{"name": "fuzzed room", "price_cents": 100, "stock": 1_000_000_000, "per_user_limit": 1, "listed": false, "admission": room}
	r := &roomApp{signer: signer, verifier: verifier}
	r.url = a.URL
	r.room = admin.CreateProduct(f, product)
	r.onSale = admin.CreateProduct(f, map[string]any{"name": "fuzzed open", "price_cents": 100, "stock": 1_000_000_000, "per_user_limit": 1, "listed": false})
	later := map[string]any{}
	for k, v := range room {
		later[k] = v
	}
	start := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	later["queue_opens_at"] = start.Add(-time.Hour).Format(time.RFC3339)
	r.later = admin.CreateProduct(f, map[string]any{"name": "fuzzed later", "price_cents": 100, "stock": 5, "listed": false,
		"sale_starts_at": start.Format(time.RFC3339), "admission": later})
	// The board learns the products within its refresh: wait until the room answers.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		res, err := (apptest.Client{URL: a.URL}).Do(http.MethodGet, "/api/v1/products/"+strconv.FormatInt(r.room, 10)+"/queue?user_id=probe", nil, nil)
		if err == nil && res.Status == http.StatusOK || time.Now().After(deadline) {
			break
		}
	}
	return r
}

// saleID is the room's sale: a new product's first.
func (r *roomApp) saleID() string { return strconv.FormatInt(r.room, 10) + ".1" }

// ticketStates are the states a ticket may be in.
var ticketStates = []string{"pre_queue", "waiting", "admitted", "sold_out", "abandoned", "session_over", "not_joined"}

// checkTicket fails t unless body is a ticket of product id's sale 1 that holds together.
func checkTicket(t *testing.T, id int64, body []byte) {
	t.Helper()
	var tk struct {
		ProductID     int64   `json:"product_id"`
		Sale          string  `json:"sale"`
		State         string  `json:"state"`
		Ticket        int64   `json:"ticket"`
		Ahead         int64   `json:"ahead"`
		ETASeconds    *int64  `json:"eta_seconds"`
		OpensAt       string  `json:"opens_at"`
		PollAfterMS   int64   `json:"poll_after_ms"`
		Pass          *string `json:"pass"`
		PassExpiresAt *string `json:"pass_expires_at"`
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&tk); err != nil {
		t.Fatalf("a 200 that is no ticket: %s: %v", body, err)
	}
	_, terr := time.Parse(time.RFC3339, tk.OpensAt)
	switch {
	case tk.ProductID != id || tk.Sale != strconv.FormatInt(id, 10)+".1":
		t.Fatalf("a ticket of another product or sale: %s", body)
	case !slices.Contains(ticketStates, tk.State):
		t.Fatalf("a ticket in no known state: %s", body)
	case tk.Ticket < 0 || tk.Ahead < 0 || tk.PollAfterMS < 0 || tk.ETASeconds != nil && *tk.ETASeconds < 0 || terr != nil:
		t.Fatalf("a ticket out of its ranges: %s", body)
	case (tk.Pass != nil) != (tk.PassExpiresAt != nil) || tk.Pass != nil && tk.State != "admitted":
		t.Fatalf("a pass without its expiry, or outside an admission: %s", body)
	}
}

// FuzzAppQueue: the queue's join (POST, the body's user_id) and poll (GET, the query), with any
// user, raw bodies and raw queries, on a waiting-room sale, one whose queue is not open, an open
// sale and no product. Every answer is the API's JSON error of a documented status and code, or
// a 200 whose ticket holds together; never a 5xx.
func FuzzAppQueue(f *testing.F) {
	for _, u := range []string{"alice", "", "a b", "é", "\xff", strings.Repeat("u", 64), strings.Repeat("u", 65), "\x00", "x'; --", "{room}", "1.1"} {
		for route := range uint8(2) {
			for product := range uint8(4) {
				f.Add(route, product, u, false, "")
			}
		}
	}
	for _, raw := range []string{`{"user_id":"alice"`, `{"user_id":1}`, `{"user_id":null}`, `[]`, `{"user_id":"a","user_id":"b"}`, `{"user_id":"alice","ticket":1}`, `"alice"`, ``} {
		f.Add(uint8(0), uint8(0), raw, true, "")
	}
	for _, q := range []string{"user_id=alice&user_id=bob", "user_id=", "user_id=%ff", "user_id=a%00b", "user=alice", "user_id=alice&x=1", ";", "%", "user_id=" + strings.Repeat("u", 65)} {
		f.Add(uint8(1), uint8(0), "", false, q)
	}
	a := startRoomApp(f)
	f.Fuzz(func(t *testing.T, route, product uint8, user string, raw bool, query string) {
		id := []int64{a.room, a.later, a.onSale, 999_999_999}[product%4]
		path := "/api/v1/products/" + strconv.FormatInt(id, 10) + "/queue"
		var status int
		var body []byte
		if route%2 == 0 {
			data := []byte(user)
			if !raw {
				data, _ = json.Marshal(map[string]any{"user_id": user})
			}
			if len(data) == 0 {
				data = []byte("{}")
			}
			status, body = a.answer(t, http.MethodPost, path, "", data, nil)
		} else {
			if query == "" {
				query = "user_id=" + url.QueryEscape(user)
			}
			if strings.ContainsFunc(query, func(r rune) bool { return r <= ' ' || r >= 0x7f || r == '#' }) {
				// No request line holds it: the HTTP server refuses it itself, in plain text.
				t.Skip("a query no client sends")
			}
			status, body = a.answer(t, http.MethodGet, path, query, nil, nil)
		}
		switch {
		case status != http.StatusOK:
		case id != a.room:
			t.Fatalf("a ticket of product %d (not the open waiting room): %s", id, body)
		case sale.ValidateUserID(user) != nil && query == "" && !raw:
			t.Fatalf("a ticket for the bad user %q: %s", user, body)
		default:
			checkTicket(t, id, body)
		}
	})
}

// answer is do that returns the answer's body too.
func (a *roomApp) answer(t *testing.T, method, path, query string, body []byte, header map[string]string) (int, []byte) {
	t.Helper()
	status, h, data := a.send(t, method, path, query, body, header)
	if status == http.StatusServiceUnavailable && a.waitReady() {
		status, h, data = a.send(t, method, path, query, body, header)
	}
	httpapi.CheckAnswer(t, method, path, status, h, data)
	return status, data
}

// passCodes are the codes of a refused pass.
var passCodes = []string{string(sale.CodePassRequired), string(sale.CodePassInvalid), string(sale.CodePassExpired)}

// FuzzAppAdmissionPass: the Admission-Pass header of a purchase in a waiting-room sale. kind 0:
// the header is s; 1: a genuine pass of user with s spliced in at n; 2: a genuine pass's header
// and signature around s as the payload (base64url); 3: a genuine pass of the buyer s, the
// purchase user's. A purchase is accepted only with a pass the target's own verifier takes for
// the user and the sale; any other is refused (403 with a pass code, or what the purchase path
// asks before the pass: a 400, a 429, the per-user limit's 409 for a buyer who bought) and
// deducts nothing: the app's reservations are always the purchases it accepted.
func FuzzAppAdmissionPass(f *testing.F) {
	for kind := range uint8(4) {
		for _, s := range []string{"", "x", "alice", ".", "..", "a.b.c", "eyJhbGciOiJub25lIn0", strings.Repeat("A", 2049), "\xff", "é"} {
			f.Add(kind, "alice", s, uint16(0))
			f.Add(kind, "bob", s, uint16(17))
		}
	}
	f.Add(uint8(3), "carol", "carol", uint16(0)) // genuine: accepted once, then limit_reached
	f.Add(uint8(1), "dave", "", uint16(0))       // genuine too
	a := startRoomApp(f)
	now := time.Now()
	f.Fuzz(func(t *testing.T, kind uint8, user, s string, n uint16) {
		genuine := func(buyer string) string {
			tok, err := a.signer.Sign(buyer, a.saleID(), now, now.Add(30*time.Minute))
			if err != nil {
				return s // not a buyer a pass can name
			}
			return tok
		}
		var pass string
		switch kind % 4 {
		case 0:
			pass = s
		case 1:
			g := genuine(user)
			at := int(n) % (len(g) + 1)
			pass = g[:at] + s + g[at:]
		case 2:
			parts := strings.Split(genuine("alice"), ".")
			pass = parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(s)) + "." + parts[2]
		case 3:
			pass = genuine(s)
		}
		data, _ := json.Marshal(map[string]any{"user_id": user})
		status, body := a.answer(t, http.MethodPost, "/api/v1/products/"+strconv.FormatInt(a.room, 10)+"/purchase", "", data,
			map[string]string{"Admission-Pass": pass})
		// HTTP drops the spaces and tabs around a header's value: the server reads the pass without.
		valid := a.verifier.Verify(strings.Trim(pass, " \t"), user, a.saleID(), time.Now()) == nil
		var e struct {
			Error struct{ Code string } `json:"error"`
		}
		_ = json.Unmarshal(body, &e)
		switch {
		case status == http.StatusAccepted:
			a.accepted.Add(1)
			if !valid {
				t.Fatalf("a purchase by %q with a pass that is not its own genuine pass was accepted: %q: %s", user, pass, body)
			}
		case valid && status == http.StatusForbidden:
			t.Fatalf("a genuine pass of %q refused: %s", user, body)
		case !valid && status != http.StatusForbidden && status != http.StatusBadRequest && status != http.StatusTooManyRequests &&
			(status != http.StatusConflict || e.Error.Code != string(sale.CodeLimitReached)):
			t.Fatalf("a purchase by %q with pass %q: %d %s; want it refused (403, or a 400, 429 or 409 limit_reached asked first)", user, pass, status, body)
		case status == http.StatusForbidden && !slices.Contains(passCodes, e.Error.Code):
			t.Fatalf("a purchase by %q with pass %q: 403 %s; want a pass's code", user, pass, body)
		}
		code, audit := a.answer(t, http.MethodGet, "/api/v1/admin/products/"+strconv.FormatInt(a.room, 10)+"/stats", "", nil, adminHeader)
		if code != http.StatusOK {
			t.Fatalf("the room's audit: %d %s", code, audit)
		}
		var st struct {
			Reserved int64 `json:"reserved"`
		}
		if err := json.Unmarshal(audit, &st); err != nil || st.Reserved != a.accepted.Load() {
			t.Fatalf("reservations %d (%v), purchases accepted %d: a refused pass deducted", st.Reserved, err, a.accepted.Load())
		}
	})
}
