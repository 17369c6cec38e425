package buyer

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

var hmacKey = []byte("0123456789abcdef0123456789abcdef") // 32 bytes

func claims(sub string, exp time.Duration) jwt.RegisteredClaims {
	now := time.Now()
	return jwt.RegisteredClaims{
		Subject:   sub,
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(exp)),
	}
}

func sign(t *testing.T, m jwt.SigningMethod, c jwt.Claims, key any) string {
	t.Helper()
	s, err := jwt.NewWithClaims(m, c).SignedString(key)
	if err != nil {
		t.Fatalf("sign: %v", err)
	}
	return s
}

func pemOf(t *testing.T, pub crypto.PublicKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

func mustVerifier(t *testing.T, c Config) *Verifier {
	t.Helper()
	v, err := NewVerifier(c)
	if err != nil {
		t.Fatalf("NewVerifier: %v", err)
	}
	return v
}

func TestHMAC(t *testing.T) {
	v := mustVerifier(t, Config{HMACKey: hmacKey, Issuer: "shop", Audience: "seckill"})
	good := claims("alice", time.Minute)
	good.Issuer, good.Audience = "shop", jwt.ClaimStrings{"seckill"}

	expired := good
	expired.ExpiresAt = jwt.NewNumericDate(time.Now().Add(-time.Minute))
	noExp := good
	noExp.ExpiresAt = nil
	wrongIss := good
	wrongIss.Issuer = "elsewhere"
	wrongAud := good
	wrongAud.Audience = jwt.ClaimStrings{"other"}
	badSub := good
	badSub.Subject = "alice smith" // a space: not a user id
	future := good
	future.IssuedAt = jwt.NewNumericDate(time.Now().Add(time.Hour))

	tests := []struct {
		name, token string
		want        string // the user id, or "" for a refusal
	}{
		{"valid", sign(t, jwt.SigningMethodHS256, good, hmacKey), "alice"},
		{"HS512", sign(t, jwt.SigningMethodHS512, good, hmacKey), "alice"},
		{"another key", sign(t, jwt.SigningMethodHS256, good, []byte("ffffffffffffffffffffffffffffffff")), ""},
		{"expired", sign(t, jwt.SigningMethodHS256, expired, hmacKey), ""},
		{"no expiry", sign(t, jwt.SigningMethodHS256, noExp, hmacKey), ""},
		{"issued in the future", sign(t, jwt.SigningMethodHS256, future, hmacKey), ""},
		{"wrong issuer", sign(t, jwt.SigningMethodHS256, wrongIss, hmacKey), ""},
		{"wrong audience", sign(t, jwt.SigningMethodHS256, wrongAud, hmacKey), ""},
		{"subject not a user id", sign(t, jwt.SigningMethodHS256, badSub, hmacKey), ""},
		{"alg none", sign(t, jwt.SigningMethodNone, good, jwt.UnsafeAllowNoneSignatureType), ""},
		{"not a jwt", "abc.def.ghi", ""},
		{"tampered subject", tamper(t, sign(t, jwt.SigningMethodHS256, good, hmacKey)), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := v.UserID(tc.token)
			if tc.want != "" {
				if err != nil || got != tc.want {
					t.Fatalf("UserID = %q, %v; want %q", got, err, tc.want)
				}
				return
			}
			if !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("UserID = %q, %v; want ErrInvalidToken", got, err)
			}
		})
	}
	if _, err := v.UserID(""); !errors.Is(err, ErrNoToken) {
		t.Fatalf("UserID(\"\") = %v, want ErrNoToken", err)
	}
}

// tamper swaps the payload of a signed token for one naming another subject.
func tamper(t *testing.T, token string) string {
	t.Helper()
	other := sign(t, jwt.SigningMethodHS256, claims("mallory", time.Minute), []byte("any key will do, it is thrown away"))
	p, q := strings.Split(token, "."), strings.Split(other, ".")
	return p[0] + "." + q[1] + "." + p[2]
}

func TestPublicKeys(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	edPub, edKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	c := claims("bob", time.Minute)
	tests := []struct {
		name   string
		pub    []byte
		method jwt.SigningMethod
		key    any
	}{
		{"RSA", pemOf(t, &rsaKey.PublicKey), jwt.SigningMethodRS256, rsaKey},
		{"RSA PKCS1", pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&rsaKey.PublicKey)}), jwt.SigningMethodPS256, rsaKey},
		{"ECDSA", pemOf(t, &ecKey.PublicKey), jwt.SigningMethodES256, ecKey},
		{"Ed25519", pemOf(t, edPub), jwt.SigningMethodEdDSA, edKey},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := mustVerifier(t, Config{PublicKeyPEM: tc.pub})
			if got, err := v.UserID(sign(t, tc.method, c, tc.key)); err != nil || got != "bob" {
				t.Fatalf("UserID = %q, %v; want bob", got, err)
			}
			// The classic confusion: a token signed with HMAC, the public key's bytes as the secret.
			forged := sign(t, jwt.SigningMethodHS256, c, tc.pub)
			if _, err := v.UserID(forged); !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("an HMAC token keyed with the public key verified: %v", err)
			}
		})
	}
}

func TestConfig(t *testing.T) {
	if (Config{}).Enabled() {
		t.Fatal("the zero Config is enabled")
	}
	for name, c := range map[string]Config{
		"no key":      {},
		"short key":   {HMACKey: []byte("short")},
		"both keys":   {HMACKey: hmacKey, PublicKeyPEM: []byte("x")},
		"not PEM":     {PublicKeyPEM: []byte("not a key")},
		"private key": {PublicKeyPEM: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}})},
	} {
		if _, err := NewVerifier(c); err == nil {
			t.Errorf("%s: NewVerifier accepted it", name)
		}
	}
}

func TestSignerRoundTrip(t *testing.T) {
	c := Config{HMACKey: hmacKey, Issuer: "dev", Audience: "seckill"}
	s, err := NewSigner(c)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := s.Token("carol_1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := mustVerifier(t, c).UserID(tok); err != nil || got != "carol_1" {
		t.Fatalf("UserID = %q, %v", got, err)
	}
	if _, err := s.Token("not valid!", time.Minute); err == nil {
		t.Fatal("Token signed an invalid user id")
	}
	if _, err := NewSigner(Config{HMACKey: []byte("short")}); err == nil {
		t.Fatal("NewSigner accepted a short key")
	}
}

func BenchmarkVerifyHS256(b *testing.B) {
	v, _ := NewVerifier(Config{HMACKey: hmacKey})
	s, _ := NewSigner(Config{HMACKey: hmacKey})
	tok, _ := s.Token("alice", time.Hour)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.UserID(tok); err != nil {
			b.Fatal(err)
		}
	}
}
