package admit

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2026, 11, 11, 0, 0, 0, 0, time.UTC)

func newKey(tb testing.TB) (ed25519.PublicKey, ed25519.PrivateKey) {
	tb.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return pub, priv
}

func mustSigner(tb testing.TB, priv ed25519.PrivateKey) *Signer {
	tb.Helper()
	s, err := NewSigner(priv)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func mustVerifier(tb testing.TB, keys ...ed25519.PublicKey) *Verifier {
	tb.Helper()
	v, err := NewVerifier(keys...)
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

// forge signs c with method and key under header fields hdr: the tokens a forger makes.
func forge(tb testing.TB, m jwt.SigningMethod, c jwt.Claims, hdr map[string]any, key any) string {
	tb.Helper()
	tok := jwt.NewWithClaims(m, c)
	for k, v := range hdr {
		if v == nil {
			delete(tok.Header, k)
		} else {
			tok.Header[k] = v
		}
	}
	s, err := tok.SignedString(key)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func passClaims(buyer, saleID string, iat, exp time.Time) claims {
	return claims{Sale: saleID, RegisteredClaims: jwt.RegisteredClaims{
		Subject: buyer, IssuedAt: jwt.NewNumericDate(iat), ExpiresAt: jwt.NewNumericDate(exp)}}
}

// TestVerify: a genuine pass passes for its buyer and sale until its expiry; every forgery and
// every misuse is refused with its own reason.
func TestVerify(t *testing.T) {
	pub, priv := newKey(t)
	_, otherPriv := newKey(t)
	s := mustSigner(t, priv)
	v := mustVerifier(t, pub)
	exp := t0.Add(5 * time.Minute)
	good, err := s.Sign("alice", "42", t0, exp)
	if err != nil {
		t.Fatal(err)
	}
	ours := map[string]any{"kid": s.KeyID(), "typ": Type}
	c := passClaims("alice", "42", t0, exp)
	noExp := c
	noExp.ExpiresAt = nil
	noIat := c
	noIat.IssuedAt = nil
	tooLong := passClaims("alice", "42", t0, t0.Add(2*time.Hour))
	future := passClaims("alice", "42", t0.Add(time.Minute), exp)
	pubPEMish := []byte(base64.StdEncoding.EncodeToString(pub))

	tests := []struct {
		name  string
		token string
		now   time.Time
		want  error // nil: accepted
	}{
		{"genuine", good, t0.Add(time.Minute), nil},
		{"genuine, its last second", good, exp.Add(-time.Second), nil},
		{"genuine, a little before the signer's clock", good, t0.Add(-3 * time.Second), nil},
		{"none", "", t0, ErrNoToken},
		{"expired", good, exp, ErrTokenExpired},
		{"expired long ago", good, exp.Add(time.Hour), ErrTokenExpired},
		{"another buyer's", mustSign(t, s, "bob", "42", t0, exp), t0, ErrTokenOtherBuyer},
		{"another sale's", mustSign(t, s, "alice", "43", t0, exp), t0, ErrTokenOtherSale},
		{"bad signature: another key under our kid", forge(t, jwt.SigningMethodEdDSA, c, ours, otherPriv), t0, ErrTokenInvalid},
		{"tampered payload", swapPayload(good, mustSign(t, s, "bob", "42", t0, exp)), t0, ErrTokenInvalid},
		{"alg none", forge(t, jwt.SigningMethodNone, c, ours, jwt.UnsafeAllowNoneSignatureType), t0, ErrTokenInvalid},
		{"alg confusion: HS256 keyed with the public key's bytes", forge(t, jwt.SigningMethodHS256, c, ours, []byte(pub)), t0, ErrTokenInvalid},
		{"alg confusion: HS256 keyed with the public key's text", forge(t, jwt.SigningMethodHS256, c, ours, pubPEMish), t0, ErrTokenInvalid},
		{"wrong key id", forge(t, jwt.SigningMethodEdDSA, c, map[string]any{"kid": "other", "typ": Type}, priv), t0, ErrTokenInvalid},
		{"no key id", forge(t, jwt.SigningMethodEdDSA, c, map[string]any{"kid": nil, "typ": Type}, priv), t0, ErrTokenInvalid},
		{"another type of JWT by the same key", forge(t, jwt.SigningMethodEdDSA, c, map[string]any{"kid": s.KeyID(), "typ": "JWT"}, priv), t0, ErrTokenInvalid},
		{"no expiry", forge(t, jwt.SigningMethodEdDSA, noExp, ours, priv), t0, ErrTokenInvalid},
		{"no issued-at", forge(t, jwt.SigningMethodEdDSA, noIat, ours, priv), t0, ErrTokenInvalid},
		{"longer than a session can be", forge(t, jwt.SigningMethodEdDSA, tooLong, ours, priv), t0, ErrTokenInvalid},
		{"issued in the future", forge(t, jwt.SigningMethodEdDSA, future, ours, priv), t0, ErrTokenInvalid},
		{"not a JWT", "abc.def.ghi", t0, ErrTokenInvalid},
		{"garbage", "not a token", t0, ErrTokenInvalid},
	}
	reasons := []error{ErrNoToken, ErrTokenExpired, ErrTokenOtherBuyer, ErrTokenOtherSale, ErrTokenInvalid}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := v.Verify(tc.token, "alice", "42", tc.now)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Verify = %v, want nil", err)
				}
				return
			}
			for _, r := range reasons {
				if errors.Is(err, r) != (r == tc.want) {
					t.Fatalf("Verify = %v; want %v, and no other reason", err, tc.want)
				}
			}
		})
	}
}

func mustSign(tb testing.TB, s *Signer, buyer, saleID string, now, exp time.Time) string {
	tb.Helper()
	tok, err := s.Sign(buyer, saleID, now, exp)
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

// swapPayload puts the payload of other under the header and signature of token.
func swapPayload(token, other string) string {
	p, q := strings.Split(token, "."), strings.Split(other, ".")
	return p[0] + "." + q[1] + "." + p[2]
}

func TestSignRefuses(t *testing.T) {
	s := mustSigner(t, ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)))
	tests := []struct {
		name, buyer, sale string
		exp               time.Time
	}{
		{"not a user id", "alice smith", "42", t0.Add(time.Minute)},
		{"not a sale id", "alice", "{42}", t0.Add(time.Minute)},
		{"expired already", "alice", "42", t0},
		{"longer than a session", "alice", "42", t0.Add(2 * time.Hour)},
	}
	for _, tc := range tests {
		if tok, err := s.Sign(tc.buyer, tc.sale, t0, tc.exp); err == nil {
			t.Errorf("%s: Sign = %q, want an error", tc.name, tok)
		}
	}
	if _, err := NewSigner(ed25519.PrivateKey("short")); err == nil {
		t.Error("NewSigner accepted a short key")
	}
	if _, err := NewVerifier(); err == nil {
		t.Error("NewVerifier accepted no key")
	}
	if _, err := NewVerifier(ed25519.PublicKey("short")); err == nil {
		t.Error("NewVerifier accepted a short key")
	}
}

// TestRotation: while a verifier holds the old key beside the new, passes of both pass; once
// the old is dropped, its passes are refused.
func TestRotation(t *testing.T) {
	oldPub, oldPriv := newKey(t)
	newPub, newPriv := newKey(t)
	oldTok := mustSign(t, mustSigner(t, oldPriv), "alice", "42", t0, t0.Add(time.Minute))
	newTok := mustSign(t, mustSigner(t, newPriv), "alice", "42", t0, t0.Add(time.Minute))
	both := mustVerifier(t, newPub, oldPub)
	for _, tok := range []string{oldTok, newTok} {
		if err := both.Verify(tok, "alice", "42", t0); err != nil {
			t.Errorf("during the rotation: %v", err)
		}
	}
	if err := mustVerifier(t, newPub).Verify(oldTok, "alice", "42", t0); !errors.Is(err, ErrTokenInvalid) {
		t.Errorf("after the rotation, the old key's pass: %v, want ErrTokenInvalid", err)
	}
}

// TestKeyIDKnownAnswer: the key id is RFC 7638's thumbprint, checked against RFC 8037's example
// key (appendix A.1 to A.3), whose public half is derived here from its private seed.
func TestKeyIDKnownAnswer(t *testing.T) {
	d, err := base64.RawURLEncoding.DecodeString("nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A")
	if err != nil {
		t.Fatal(err)
	}
	pub := ed25519.NewKeyFromSeed(d).Public().(ed25519.PublicKey)
	if got, want := b64(pub), "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"; got != want {
		t.Fatalf("x = %s, want %s", got, want)
	}
	if got, want := KeyID(pub), "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"; got != want {
		t.Fatalf("KeyID = %s, want %s", got, want)
	}
}

// TestJWKS: the published document names each key as RFC 8037 says, and a verifier built from
// the document alone accepts the signer's passes.
func TestJWKS(t *testing.T) {
	pub, priv := newKey(t)
	pub2, _ := newKey(t)
	s := mustSigner(t, priv)
	doc := mustVerifier(t, pub, pub2, pub).JWKS() // a key given twice is published once
	var got struct{ Keys []JWK }
	if err := json.Unmarshal(doc, &got); err != nil {
		t.Fatalf("%s: %v", doc, err)
	}
	want := []JWK{
		{Kty: "OKP", Crv: "Ed25519", X: b64(pub), Kid: s.KeyID(), Use: "sig", Alg: "EdDSA"},
		{Kty: "OKP", Crv: "Ed25519", X: b64(pub2), Kid: KeyID(pub2), Use: "sig", Alg: "EdDSA"},
	}
	if diff := cmp.Diff(want, got.Keys); diff != "" {
		t.Fatalf("JWKS (-want +got):\n%s", diff)
	}
	k, err := got.Keys[0].PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := mustVerifier(t, k).Verify(mustSign(t, s, "alice", "42", t0, t0.Add(time.Minute)), "alice", "42", t0); err != nil {
		t.Fatalf("a verifier of the published key: %v", err)
	}
	for name, bad := range map[string]JWK{
		"RSA":           {Kty: "RSA", Crv: "Ed25519", X: b64(pub)},
		"X25519":        {Kty: "OKP", Crv: "X25519", X: b64(pub)},
		"short x":       {Kty: "OKP", Crv: "Ed25519", X: "AAAA"},
		"kid not thumb": {Kty: "OKP", Crv: "Ed25519", X: b64(pub), Kid: "mine"},
	} {
		if _, err := bad.PublicKey(); err == nil {
			t.Errorf("%s: PublicKey accepted it", name)
		}
	}
}

// BenchmarkVerify is the cost the purchase path pays per purchase of a waiting-room sale.
func BenchmarkVerify(b *testing.B) {
	pub, priv := newKey(b)
	v := mustVerifier(b, pub)
	tok := mustSign(b, mustSigner(b, priv), "alice", "42", t0, t0.Add(5*time.Minute))
	now := t0.Add(time.Minute)
	b.ReportAllocs()
	for b.Loop() {
		if err := v.Verify(tok, "alice", "42", now); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSign is the cost of a poll that finds its visitor admitted.
func BenchmarkSign(b *testing.B) {
	_, priv := newKey(b)
	s := mustSigner(b, priv)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Sign("alice", "42", t0, t0.Add(5*time.Minute)); err != nil {
			b.Fatal(err)
		}
	}
}
