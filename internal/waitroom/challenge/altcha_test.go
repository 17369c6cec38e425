package challenge_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/waitroom/challenge"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

// clock is a settable clock for the tests.
type clock struct{ at atomic.Int64 }

func newClock(t time.Time) *clock    { c := &clock{}; c.at.Store(t.UnixNano()); return c }
func (c *clock) now() time.Time      { return time.Unix(0, c.at.Load()) }
func (c *clock) add(d time.Duration) { c.at.Add(int64(d)) }

func newAltcha(tb testing.TB, clk *clock, o challenge.AltchaOptions) *challenge.Altcha {
	tb.Helper()
	o.Now = clk.now
	a, err := challenge.NewAltcha(testKey, challenge.NewMemorySpent(clk.now), o)
	if err != nil {
		tb.Fatal(err)
	}
	return a
}

func issue(tb testing.TB, a *challenge.Altcha) challenge.Challenge {
	tb.Helper()
	c, err := a.Issue(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func solve(tb testing.TB, c challenge.Challenge) string {
	tb.Helper()
	s, err := challenge.Solve(context.Background(), c)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// decode returns the fields of a solution.
func decode(tb testing.TB, s string) map[string]any {
	tb.Helper()
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		tb.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		tb.Fatal(err)
	}
	return m
}

func encode(tb testing.TB, m map[string]any) string {
	tb.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// TestIssueIsTheProtocol: an issued challenge is what the ALTCHA spec says, computed here without
// the library: SHA-256 in hex of salt + the secret number, HMAC-SHA-256 in hex of that under the
// key, a salt that carries its expiry, and a number within maxnumber.
func TestIssueIsTheProtocol(t *testing.T) {
	at := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	a := newAltcha(t, newClock(at), challenge.AltchaOptions{MaxNumber: 5000, Expires: time.Minute})
	c := issue(t, a)
	if c.Algorithm != "SHA-256" || c.MaxNumber != 5000 || !c.Expires.Equal(at.Add(time.Minute)) {
		t.Fatalf("issued %+v", c)
	}
	if want := "?expires=" + strconv.FormatInt(at.Add(time.Minute).Unix(), 10) + "&"; !strings.HasSuffix(c.Salt, want) || len(c.Salt) < 10+len(want) {
		t.Errorf("salt %q: want at least 10 random characters, then %q", c.Salt, want)
	}
	mac := hmac.New(sha256.New, testKey)
	mac.Write([]byte(c.Challenge))
	if got := hex.EncodeToString(mac.Sum(nil)); got != c.Signature {
		t.Errorf("signature %s, want HMAC-SHA-256(key, challenge) = %s", c.Signature, got)
	}
	n := int64(decode(t, solve(t, c))["number"].(float64))
	sum := sha256.Sum256([]byte(c.Salt + strconv.FormatInt(n, 10)))
	if hex.EncodeToString(sum[:]) != c.Challenge || n < 0 || n > c.MaxNumber {
		t.Errorf("number %d: SHA-256(salt+number) = %x, challenge %s", n, sum, c.Challenge)
	}
	if other := issue(t, a); other.Salt == c.Salt || other.Challenge == c.Challenge {
		t.Errorf("two challenges share a salt or a challenge: %+v %+v", c, other)
	}
}

// TestVerify: a solution passes once; every forgery, an expired and a replayed one are refused
// with the error of their kind.
func TestVerify(t *testing.T) {
	clk := newClock(time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC))
	a := newAltcha(t, clk, challenge.AltchaOptions{MaxNumber: 2000, Expires: time.Minute})
	ctx := context.Background()
	c := issue(t, a)
	good := solve(t, c)
	fields := decode(t, good)
	with := func(k string, v any) string {
		m := decode(t, good)
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return encode(t, m)
	}
	flip := func(s string) string { // another hex digit at the end
		last := s[len(s)-1]
		if last == '0' {
			return s[:len(s)-1] + "1"
		}
		return s[:len(s)-1] + "0"
	}
	n := fields["number"].(float64)
	// Another key's genuine challenge, and a salt whose expiry is pushed back by the client.
	otherKey, err := challenge.NewAltcha([]byte(strings.Repeat("k", 32)), challenge.NewMemorySpent(clk.now), challenge.AltchaOptions{MaxNumber: 2000, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	foreign := solve(t, issue(t, otherKey))
	later := strings.Replace(c.Salt, "expires=", "expires=9", 1)

	for _, tc := range []struct {
		name, solution string
		want           error
	}{
		{"missing", "", challenge.ErrRequired},
		{"not base64", "%%%", challenge.ErrInvalid},
		{"base64 of no JSON", base64.StdEncoding.EncodeToString([]byte("hello")), challenge.ErrInvalid},
		{"too long", strings.Repeat("A", challenge.MaxSolutionLen+4), challenge.ErrInvalid},
		{"another algorithm", with("algorithm", "SHA-1"), challenge.ErrInvalid},
		{"no number", with("number", nil), challenge.ErrInvalid},
		{"negative number", with("number", -1), challenge.ErrInvalid},
		{"the wrong number", with("number", n+1), challenge.ErrInvalid},
		{"a tampered signature", with("signature", flip(c.Signature)), challenge.ErrInvalid},
		{"a tampered challenge", with("challenge", flip(c.Challenge)), challenge.ErrInvalid},
		{"a later expiry written in the salt", with("salt", later), challenge.ErrInvalid},
		{"another server's challenge", foreign, challenge.ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := a.Verify(ctx, tc.solution, ""); !errors.Is(err, tc.want) {
				t.Errorf("Verify: %v, want %v", err, tc.want)
			}
		})
	}
	if err := a.Verify(ctx, with("took", 812), "198.51.100.7"); err != nil {
		t.Fatalf("the genuine solution, with the widget's own field: %v", err)
	}
	if err := a.Verify(ctx, good, ""); !errors.Is(err, challenge.ErrInvalid) || !strings.Contains(err.Error(), "used already") {
		t.Errorf("replayed: %v, want invalid, used already", err)
	}

	expiring := issue(t, a)
	sol := solve(t, expiring)
	clk.add(time.Minute + time.Second)
	if err := a.Verify(ctx, sol, ""); !errors.Is(err, challenge.ErrExpired) {
		t.Errorf("expired: %v, want %v", err, challenge.ErrExpired)
	}
}

// TestVerifyOnceUnderRace: of many concurrent joins with one solution, exactly one passes.
func TestVerifyOnceUnderRace(t *testing.T) {
	a := newAltcha(t, newClock(time.Now()), challenge.AltchaOptions{MaxNumber: 1000})
	sol := solve(t, issue(t, a))
	var passed atomic.Int32
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			if a.Verify(context.Background(), sol, "") == nil {
				passed.Add(1)
			}
		})
	}
	wg.Wait()
	if passed.Load() != 1 {
		t.Errorf("%d of 32 concurrent verifications passed, want 1", passed.Load())
	}
}

func TestNewAltchaRefuses(t *testing.T) {
	spent := challenge.NewMemorySpent(nil)
	for _, tc := range []struct {
		name  string
		key   []byte
		spent challenge.Spent
		o     challenge.AltchaOptions
	}{
		{"short key", []byte("short"), spent, challenge.AltchaOptions{}},
		{"no replay cache", testKey, nil, challenge.AltchaOptions{}},
		{"negative max number", testKey, spent, challenge.AltchaOptions{MaxNumber: -1}},
	} {
		if _, err := challenge.NewAltcha(tc.key, tc.spent, tc.o); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
}

// TestMemorySpent: an id is spent once until its time, then forgotten; the sweep keeps the map
// at the live entries.
func TestMemorySpent(t *testing.T) {
	clk := newClock(time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC))
	m := challenge.NewMemorySpent(clk.now)
	ctx := context.Background()
	until := clk.now().Add(time.Minute)
	if ok, _ := m.Spend(ctx, "a", until); !ok {
		t.Fatal("first spend refused")
	}
	if ok, _ := m.Spend(ctx, "a", until); ok {
		t.Fatal("second spend accepted")
	}
	clk.add(time.Minute)
	if ok, _ := m.Spend(ctx, "a", clk.now().Add(time.Minute)); !ok {
		t.Fatal("a spend after its time refused")
	}
	for i := range 5000 {
		_, _ = m.Spend(ctx, strconv.Itoa(i), clk.now().Add(time.Second))
	}
	clk.add(2 * time.Second)
	for i := range 5000 {
		_, _ = m.Spend(ctx, "later"+strconv.Itoa(i), clk.now().Add(time.Second))
	}
	if n := m.Len(); n > 2*5000 {
		t.Errorf("%d entries held after the first 5000 expired, want the expired swept", n)
	}
}

func TestSolveStops(t *testing.T) {
	a := newAltcha(t, newClock(time.Now()), challenge.AltchaOptions{MaxNumber: 1000})
	c := issue(t, a)
	c.MaxNumber = 10 // the secret number is likely above: no solution within
	c.Challenge = strings.Repeat("0", 64)
	if _, err := challenge.Solve(context.Background(), c); !errors.Is(err, challenge.ErrNoSolution) {
		t.Errorf("Solve of an unsolvable challenge: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c.MaxNumber = 1 << 40
	if _, err := challenge.Solve(ctx, c); !errors.Is(err, context.Canceled) {
		t.Errorf("Solve after its context ended: %v", err)
	}
}
