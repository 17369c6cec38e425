package httpapi_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/apptest"
	"github.com/seckill-go/seckill-go/internal/httpapi"
	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/waitroom/challenge"
	"github.com/seckill-go/seckill-go/internal/waitroom/challenge/turnstile/turnstiletest"
)

// The bot challenge before a join, through the real app on the real services (apptest).

const appChallengeKey = "app-test-altcha-key-0123456789abcdef"

// challengeEnv is the settings of a replica with the ALTCHA challenge on, easy to solve.
var challengeEnv = map[string]string{
	"SECKILL_BOT_CHALLENGE": "altcha", "SECKILL_ALTCHA_KEY": appChallengeKey, "SECKILL_ALTCHA_MAX_NUMBER": "2000",
}

// waitingRoomSale creates a waiting-room sale open now and returns its queue's path.
func waitingRoomSale(tb testing.TB, url string) string {
	tb.Helper()
	admin := apptest.Client{URL: url, Token: apptest.AdminToken}
	id := admin.CreateProduct(tb, map[string]any{"name": "queued", "price_cents": 100, "stock": 5, "strategy": "mysql", "listed": false,
		"admission": map[string]any{"mode": "waiting_room", "admit_rate": 10, "max_active": 10, "session_seconds": 60, "abandon_seconds": 30}})
	return "/api/v1/products/" + strconv.FormatInt(id, 10) + "/queue"
}

// fetchChallenge gets a challenge from the app's route, and holds the answer to the API's promises.
func fetchChallenge(tb testing.TB, url string) challenge.Challenge {
	tb.Helper()
	r := apptest.Client{URL: url}.MustDo(tb, http.MethodGet, "/api/v1/waitroom/challenge", nil, nil)
	httpapi.CheckAnswer(tb, http.MethodGet, "/api/v1/waitroom/challenge", r.Status, r.Header, []byte(r.Raw))
	if r.Status != http.StatusOK || r.Header.Get("Cache-Control") != "no-store" {
		tb.Fatalf("GET challenge: %d %v %s", r.Status, r.Header, r.Raw)
	}
	return challenge.Challenge{Algorithm: r.Str("algorithm"), Challenge: r.Str("challenge"), MaxNumber: int64(r.Num("maxnumber")),
		Salt: r.Str("salt"), Signature: r.Str("signature")}
}

func solveOf(tb testing.TB, c challenge.Challenge) string {
	tb.Helper()
	s, err := challenge.Solve(context.Background(), c)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// TestAppJoinChallenge: with ALTCHA on, the real app's join takes a solution of a challenge its
// route issued, once; missing, wrong, expired, replayed and tampered solutions are 403 with the
// codes of docs/api.md and leave the queue unchanged (the refused buyers have not joined); a
// solution issued by one replica joins on another, and its replay is refused by the first (the
// replay cache is Redis, shared); the poll needs no solution.
func TestAppJoinChallenge(t *testing.T) {
	itest.Integration(t)
	stack := apptest.NewStack(t)
	a := stack.Start(t, challengeEnv)
	b := stack.Start(t, challengeEnv)
	queue := waitingRoomSale(t, a.URL)
	join := func(url, user, solution string) apptest.Response {
		t.Helper()
		var h map[string]string
		if solution != "" {
			h = map[string]string{"Challenge-Solution": solution}
		}
		r := apptest.Client{URL: url}.MustDo(t, http.MethodPost, queue, map[string]any{"user_id": user}, h)
		httpapi.CheckAnswer(t, http.MethodPost, queue, r.Status, r.Header, []byte(r.Raw))
		return r
	}
	state := func(url, user string) string {
		t.Helper()
		r := apptest.Client{URL: url}.MustDo(t, http.MethodGet, queue+"?user_id="+user, nil, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("poll %s: %d %s", user, r.Status, r.Raw)
		}
		return r.Str("state")
	}

	c := fetchChallenge(t, a.URL)
	good := solveOf(t, c)
	wrong := challenge.Solution(c, c.MaxNumber+1)
	forged := c
	forged.Signature = strings.Repeat("0", 64)
	tampered := solveOf(t, forged)
	// A genuine challenge of the app's key, issued three minutes ago: expired.
	past := func() time.Time { return time.Now().Add(-3 * time.Minute) }
	old, err := challenge.NewAltcha([]byte(appChallengeKey), challenge.NewMemorySpent(past), challenge.AltchaOptions{MaxNumber: 2000, Now: past})
	if err != nil {
		t.Fatal(err)
	}
	oc, err := old.Issue(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	expired := solveOf(t, oc)

	for _, tc := range []struct{ name, user, solution, code string }{
		{"missing", "m1", "", "challenge_required"},
		{"the wrong number", "m2", wrong, "challenge_invalid"},
		{"a tampered signature", "m3", tampered, "challenge_invalid"},
		{"expired", "m4", expired, "challenge_expired"},
		{"not a solution", "m5", "bm90IGEgc29sdXRpb24=", "challenge_invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r := join(a.URL, tc.user, tc.solution); r.Status != http.StatusForbidden || r.ErrorCode() != tc.code {
				t.Errorf("join: %d %s; want 403 %s", r.Status, r.Raw, tc.code)
			}
			if s := state(a.URL, tc.user); s != "not_joined" {
				t.Errorf("after the refused join the buyer is %s, want not_joined", s)
			}
		})
	}

	if r := join(b.URL, "alice", good); r.Status != http.StatusOK || r.Num("ticket") != 1 {
		t.Fatalf("alice joins on replica b with a's challenge: %d %s; want 200, ticket 1", r.Status, r.Raw)
	}
	if r := join(a.URL, "bob", good); r.Status != http.StatusForbidden || r.ErrorCode() != "challenge_invalid" || !strings.Contains(r.Raw, "used already") {
		t.Errorf("bob replays alice's solution on replica a: %d %s; want 403 challenge_invalid, used already", r.Status, r.Raw)
	}
	if s := state(b.URL, "bob"); s != "not_joined" {
		t.Errorf("after the replay bob is %s, want not_joined", s)
	}
	if r := join(a.URL, "bob", solveOf(t, fetchChallenge(t, b.URL))); r.Status != http.StatusOK || r.Num("ticket") != 2 {
		t.Errorf("bob joins with a solution of his own: %d %s; want 200, ticket 2", r.Status, r.Raw)
	}
}

// TestAppJoinWithoutChallenge: off by default, the real app's join needs no solution, and the
// challenge route is not served.
func TestAppJoinWithoutChallenge(t *testing.T) {
	itest.Integration(t)
	a := apptest.NewStack(t).Start(t, nil)
	queue := waitingRoomSale(t, a.URL)
	buyer := apptest.Client{URL: a.URL}
	if r := buyer.MustDo(t, http.MethodPost, queue, map[string]any{"user_id": "alice"}, nil); r.Status != http.StatusOK || r.Num("ticket") != 1 {
		t.Errorf("join without a challenge: %d %s; want 200", r.Status, r.Raw)
	}
	if r := buyer.MustDo(t, http.MethodGet, "/api/v1/waitroom/challenge", nil, nil); r.Status != http.StatusNotFound {
		t.Errorf("GET challenge with the challenge off: %d; want 404", r.Status)
	}
}

// TestAppJoinTurnstile: with Turnstile on, the real app asks siteverify (a stand-in answering as
// Cloudflare documents its test secret keys): the passing key joins, the failing one is 403 and
// the buyer has not joined.
func TestAppJoinTurnstile(t *testing.T) {
	itest.Integration(t)
	cf := turnstiletest.New()
	defer cf.Close()
	stack := apptest.NewStack(t)
	pass := stack.Start(t, map[string]string{"SECKILL_BOT_CHALLENGE": "turnstile", "SECKILL_TURNSTILE_SECRET": turnstiletest.SecretPass, "SECKILL_TURNSTILE_URL": cf.URL})
	fail := stack.Start(t, map[string]string{"SECKILL_BOT_CHALLENGE": "turnstile", "SECKILL_TURNSTILE_SECRET": turnstiletest.SecretFail, "SECKILL_TURNSTILE_URL": cf.URL})
	queue := waitingRoomSale(t, pass.URL)
	token := map[string]string{"Challenge-Solution": turnstiletest.DummyToken}
	if r := (apptest.Client{URL: fail.URL}).MustDo(t, http.MethodPost, queue, map[string]any{"user_id": "mallory"}, token); r.Status != http.StatusForbidden || r.ErrorCode() != "challenge_invalid" {
		t.Errorf("join with the failing key: %d %s; want 403 challenge_invalid", r.Status, r.Raw)
	}
	if r := (apptest.Client{URL: pass.URL}).MustDo(t, http.MethodPost, queue, map[string]any{"user_id": "alice"}, token); r.Status != http.StatusOK || r.Num("ticket") != 1 {
		t.Errorf("join with the passing key: %d %s; want 200, ticket 1 (mallory never joined)", r.Status, r.Raw)
	}
	if reqs := cf.Requests(); len(reqs) != 2 || reqs[1].Secret != turnstiletest.SecretPass || reqs[1].RemoteIP != "127.0.0.1" {
		t.Errorf("siteverify got %+v", reqs)
	}
}

// BenchmarkAppJoin: joins through the real app on the real services (a new buyer each time),
// alternately on a replica with the challenge off and on one with ALTCHA at its default
// difficulty, so that both see the same weather on a shared machine; beside them a Redis PING,
// the yardstick of one round trip. Each iteration is one of each; the metrics are their mean wall
// times, and off-ratio is the ALTCHA join's over the plain one's. The solutions are made off the
// clock (solving is BenchmarkSolve's).
func BenchmarkAppJoin(b *testing.B) {
	itest.Integration(b)
	stack := apptest.NewStack(b)
	on := map[string]string{"SECKILL_BOT_CHALLENGE": "altcha", "SECKILL_ALTCHA_KEY": appChallengeKey}
	off, altcha := stack.Start(b, nil), stack.Start(b, on)
	queue := waitingRoomSale(b, off.URL)
	rdb := itest.Redis(b)
	ctx := context.Background()
	join := func(url, user string, h map[string]string) time.Duration {
		start := time.Now()
		r, err := apptest.Client{URL: url}.Do(http.MethodPost, queue, map[string]any{"user_id": user}, h)
		if err != nil || r.Status != http.StatusOK {
			b.Fatalf("join: %v %d %s", err, r.Status, r.Raw)
		}
		return time.Since(start)
	}
	const pool = 128
	var sols []string
	i := pool
	var tOff, tOn, tPing time.Duration
	suffix := itest.Suffix(6)
	n := 0
	for b.Loop() {
		if i == pool {
			b.StopTimer()
			sols = make([]string, pool)
			for j := range sols {
				sols[j] = solveOf(b, fetchChallenge(b, altcha.URL))
			}
			i = 0
			b.StartTimer()
		}
		n++
		user := suffix + "-" + strconv.Itoa(n)
		tOff += join(off.URL, "off-"+user, nil)
		tOn += join(altcha.URL, "on-"+user, map[string]string{"Challenge-Solution": sols[i]})
		i++
		start := time.Now()
		if err := rdb.Ping(ctx).Err(); err != nil {
			b.Fatal(err)
		}
		tPing += time.Since(start)
	}
	per := func(d time.Duration) float64 { return float64(d) / float64(b.N) }
	b.ReportMetric(per(tOff), "off-ns/join")
	b.ReportMetric(per(tOn), "altcha-ns/join")
	b.ReportMetric(per(tPing), "redis-ping-ns")
	b.ReportMetric(float64(tOn)/float64(tOff), "off-ratio")
}
