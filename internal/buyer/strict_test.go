package buyer

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// TestTimeClaimsAreNumbers (issue #29): exp, nbf and iat are JSON numbers (RFC 7519's
// NumericDate). golang-jwt's RegisteredClaims also read a string of digits as a date, so a token
// with "exp":"<seconds>" was accepted; the subject must be a string too.
func TestTimeClaimsAreNumbers(t *testing.T) {
	v := mustVerifier(t, Config{HMACKey: hmacKey})
	now := time.Now().Unix()
	exp, iat := now+600, now-60
	str := func(n int64) string { return strconv.FormatInt(n, 10) }
	for _, tc := range []struct {
		name   string
		claims jwt.MapClaims
		ok     bool
	}{
		{"numbers", jwt.MapClaims{"sub": "alice", "exp": exp, "iat": iat}, true},
		{"fractional numbers", jwt.MapClaims{"sub": "alice", "exp": float64(exp) + 0.5, "iat": float64(iat) + 0.25}, true},
		{"no iat", jwt.MapClaims{"sub": "alice", "exp": exp}, true},
		{"exp as a string", jwt.MapClaims{"sub": "alice", "exp": str(exp), "iat": iat}, false},
		{"iat as a string", jwt.MapClaims{"sub": "alice", "exp": exp, "iat": str(iat)}, false},
		{"nbf as a string", jwt.MapClaims{"sub": "alice", "exp": exp, "iat": iat, "nbf": str(iat)}, false},
		{"exp as a boolean", jwt.MapClaims{"sub": "alice", "exp": true}, false},
		{"exp null", jwt.MapClaims{"sub": "alice", "exp": nil}, false},
		{"exp zero", jwt.MapClaims{"sub": "alice", "exp": 0}, false},
		{"subject a number", jwt.MapClaims{"sub": 42, "exp": exp}, false},
		{"subject a list", jwt.MapClaims{"sub": []string{"alice"}, "exp": exp}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := v.UserID(sign(t, jwt.SigningMethodHS256, tc.claims, hmacKey))
			if tc.ok != (err == nil) || (tc.ok && got != "alice") {
				t.Fatalf("UserID = %q, %v; want accepted: %v", got, err, tc.ok)
			}
			if !tc.ok && !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("UserID = %v, want ErrInvalidToken", err)
			}
		})
	}
}

// TestMaxTTL (issue #29): a token whose lifetime is over MaxTTL is refused: exp − iat, or exp −
// now (with the leeway) when it has no iat. An exp in the year 9999 was accepted. The Signer
// refuses to mint what its verifiers would refuse.
func TestMaxTTL(t *testing.T) {
	now := time.Now()
	at := func(d time.Duration) int64 { return now.Add(d).Unix() }
	for _, tc := range []struct {
		name   string
		c      Config
		claims jwt.MapClaims
		ok     bool
	}{
		{"the default, a day", Config{}, jwt.MapClaims{"exp": at(24 * time.Hour), "iat": at(0)}, true},
		{"over the default", Config{}, jwt.MapClaims{"exp": at(24*time.Hour + time.Second), "iat": at(0)}, false},
		{"year 9999", Config{}, jwt.MapClaims{"exp": time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC).Unix(), "iat": at(0)}, false},
		{"year 9999, no iat", Config{}, jwt.MapClaims{"exp": time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC).Unix()}, false},
		{"an hour, set to an hour", Config{MaxTTL: time.Hour}, jwt.MapClaims{"exp": at(time.Hour), "iat": at(0)}, true},
		{"issued long ago, expiring soon", Config{MaxTTL: time.Hour}, jwt.MapClaims{"exp": at(time.Minute), "iat": at(-2 * time.Hour)}, false},
		{"no iat, within the leeway", Config{MaxTTL: time.Hour, Leeway: 30 * time.Second}, jwt.MapClaims{"exp": at(time.Hour + 20*time.Second)}, true},
		{"no iat, past the leeway", Config{MaxTTL: time.Hour, Leeway: 30 * time.Second}, jwt.MapClaims{"exp": at(time.Hour + time.Minute)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.c.HMACKey = hmacKey
			tc.claims["sub"] = "alice"
			got, err := mustVerifier(t, tc.c).UserID(sign(t, jwt.SigningMethodHS256, tc.claims, hmacKey))
			if tc.ok != (err == nil) || (tc.ok && got != "alice") {
				t.Fatalf("UserID = %q, %v; want accepted: %v", got, err, tc.ok)
			}
			if !tc.ok && !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("UserID = %v, want ErrInvalidToken", err)
			}
		})
	}

	c := Config{HMACKey: hmacKey, MaxTTL: time.Hour}
	s, err := NewSigner(c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Token("alice", time.Hour+time.Second); err == nil {
		t.Fatal("the signer minted a token over MaxTTL")
	}
	tok, err := s.Token("alice", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := mustVerifier(t, c).UserID(tok); err != nil || got != "alice" {
		t.Fatalf("a token of MaxTTL: UserID = %q, %v", got, err)
	}
}
