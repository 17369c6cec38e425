// Package admit signs and checks the waiting room's admission passes (issue #32): a JWT signed
// with Ed25519 (EdDSA) saying that one buyer may buy in one sale until an expiry. The waiting room
// signs a pass when a visitor's poll finds it admitted; the purchase path checks it with Verify,
// which reads nothing but the token and the public keys it was built with: no I/O, no shared
// state, tens of microseconds, so that a replica checks every purchase of a waiting-room sale
// without asking Redis, and any replica checks a pass another signed.
//
// Why a package of its own, and golang-jwt rather than Ed25519 by hand in internal/waitroom: the
// module already trusts golang-jwt for buyer tokens (internal/buyer), so there is one JWT parser
// to audit, and its method allow-list is what stops the classic forgeries ("alg":"none", an HMAC
// keyed with the public key); a hand-written parser is where those bugs are born. A domain package
// may import no such library (internal/layering_test.go), so the pass lives here, beside the
// domain, and internal/waitroom stays pure.
//
// Ed25519 rather than a shared HMAC key: verifying needs only the public key, which can be
// published (JWKS), so whatever else checks passes (an edge, another service) never holds the
// power to mint them. The package never decides an admission: it signs what it is told.
package admit

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/waitroom"
)

// The reasons a pass is refused. Every refusal wraps exactly one of them, and each wraps the
// sale domain's refusal it is (sale.ErrPassMissing, sale.ErrPassInvalid, sale.ErrPassExpired): a
// Verifier is the purchase path's sale.PassVerifier as it is, and its refusals find their API
// codes in sale's error table.
var (
	// ErrNoToken means the request carried no pass.
	ErrNoToken = fmt.Errorf("no admission pass: %w", sale.ErrPassMissing)
	// ErrTokenExpired means the pass was genuine but its session is over: the buyer joins again.
	ErrTokenExpired = fmt.Errorf("%w", sale.ErrPassExpired)
	// ErrTokenOtherBuyer means the pass is genuine but another buyer's: shared, or stolen.
	ErrTokenOtherBuyer = fmt.Errorf("%w: it is another buyer's", sale.ErrPassInvalid)
	// ErrTokenOtherSale means the pass is genuine but for another sale (or an earlier sale of
	// the same product: a reset starts a new one).
	ErrTokenOtherSale = fmt.Errorf("%w: it is for another sale", sale.ErrPassInvalid)
	// ErrTokenInvalid means the pass is not one this waiting room signed, or not a well-formed
	// one: a bad signature, another algorithm, an unknown key id, a missing or odd claim.
	ErrTokenInvalid = fmt.Errorf("%w: not signed by this shop's waiting room, or malformed", sale.ErrPassInvalid)
)

var (
	_ sale.PassVerifier   = (*Verifier)(nil)
	_ waitroom.PassSigner = (*Signer)(nil)
)

// Type is the pass's "typ" header (RFC 8725 §3.11, explicit typing): a JWT of another kind signed
// by the same key, should one ever be, is not taken for a pass.
const Type = "waitroom+jwt"

// ClockSkew is how far in the future a pass's issued-at may be: the replica that signed it may
// run a little ahead of the one checking it. The expiry gets no such grace: the session is the
// contract.
const ClockSkew = 5 * time.Second

// claims are a pass's: sub is the buyer, sale the sale id, iat and exp the session's bounds.
type claims struct {
	Sale string `json:"sale"`
	jwt.RegisteredClaims
}

// KeyID is the key id of pub: its RFC 7638 JWK thumbprint (SHA-256, base64url). Every replica
// holding the same key derives the same id without being told, and a rotated key gets a new one.
func KeyID(pub ed25519.PublicKey) string {
	// The required members of an OKP key, in lexicographic order, without whitespace (RFC 8037 §2).
	sum := sha256.Sum256([]byte(`{"crv":"Ed25519","kty":"OKP","x":"` + b64(pub) + `"}`))
	return b64(sum[:])
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// Signer signs passes with one Ed25519 key. It is safe for concurrent use.
type Signer struct {
	key ed25519.PrivateKey
	kid string
}

// NewSigner returns a signer of key.
func NewSigner(key ed25519.PrivateKey) (*Signer, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("admit: an Ed25519 private key is %d bytes, got %d", ed25519.PrivateKeySize, len(key))
	}
	return &Signer{key: key, kid: KeyID(key.Public().(ed25519.PublicKey))}, nil
}

// Public returns the public key that verifies the signer's passes.
func (s *Signer) Public() ed25519.PublicKey { return s.key.Public().(ed25519.PublicKey) }

// KeyID returns the key id the signer's passes carry.
func (s *Signer) KeyID() string { return s.kid }

// Sign returns a pass admitting buyer to saleID from now until expires (the session's end, as
// the waiting room answered it; it is kept to the second below, as JWT dates are). A lifetime
// that is not positive or longer than waitroom.MaxSession is refused: such a pass is a mistake.
func (s *Signer) Sign(buyer, saleID string, now, expires time.Time) (string, error) {
	if err := sale.ValidateUserID(buyer); err != nil {
		return "", fmt.Errorf("admit: %w", err)
	}
	if err := waitroom.ValidateSaleID(saleID); err != nil {
		return "", fmt.Errorf("admit: %w", err)
	}
	iat, exp := now.Truncate(time.Second), expires.Truncate(time.Second)
	if life := exp.Sub(iat); life <= 0 || life > waitroom.MaxSession {
		return "", fmt.Errorf("admit: a pass living %v (from %v to %v): want more than 0 and at most %v", life, now, expires, waitroom.MaxSession)
	}
	t := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims{Sale: saleID, RegisteredClaims: jwt.RegisteredClaims{
		Subject: buyer, IssuedAt: jwt.NewNumericDate(iat), ExpiresAt: jwt.NewNumericDate(exp),
	}})
	t.Header["kid"] = s.kid
	t.Header["typ"] = Type
	tok, err := t.SignedString(s.key)
	if err != nil {
		return "", fmt.Errorf("admit: sign: %w", err)
	}
	return tok, nil
}

// Verifier checks passes against a set of public keys: the signing key, and during a rotation
// the one before it, until the passes it signed have expired. It is safe for concurrent use.
type Verifier struct {
	keys   map[string]ed25519.PublicKey
	order  []string // key ids in the order given, for JWKS
	parser *jwt.Parser
	keyFn  jwt.Keyfunc
}

// NewVerifier returns a verifier of passes signed by any of keys.
func NewVerifier(keys ...ed25519.PublicKey) (*Verifier, error) {
	if len(keys) == 0 {
		return nil, errors.New("admit: no public key")
	}
	v := &Verifier{keys: make(map[string]ed25519.PublicKey, len(keys))}
	for _, k := range keys {
		if len(k) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("admit: an Ed25519 public key is %d bytes, got %d", ed25519.PublicKeySize, len(k))
		}
		id := KeyID(k)
		if _, dup := v.keys[id]; !dup {
			v.order = append(v.order, id)
		}
		v.keys[id] = k
	}
	// EdDSA only, whatever the token's header says: "none" and HS256 never reach a key. The
	// claims are checked below against the caller's now, not the parser's clock.
	v.parser = jwt.NewParser(jwt.WithValidMethods([]string{jwt.SigningMethodEdDSA.Alg()}), jwt.WithoutClaimsValidation())
	v.keyFn = v.key
	return v, nil
}

// key picks the public key named by the token's kid: no kid, or one of no key here, is refused
// before any signature is checked.
func (v *Verifier) key(t *jwt.Token) (any, error) {
	if typ, _ := t.Header["typ"].(string); typ != Type {
		return nil, fmt.Errorf("typ %q, want %q", t.Header["typ"], Type)
	}
	kid, _ := t.Header["kid"].(string)
	k, ok := v.keys[kid]
	if !ok {
		return nil, fmt.Errorf("unknown key id %q", kid)
	}
	return k, nil
}

// Verify checks that token is a genuine pass admitting buyer to saleID at now. It does no I/O.
// A refusal wraps exactly one of ErrNoToken, ErrTokenInvalid, ErrTokenOtherBuyer,
// ErrTokenOtherSale and ErrTokenExpired (in the order they are checked: whose and for what
// before when), with what failed for the log.
func (v *Verifier) Verify(token, buyer, saleID string, now time.Time) error {
	if token == "" {
		return ErrNoToken
	}
	var c claims
	if _, err := v.parser.ParseWithClaims(token, &c, v.keyFn); err != nil {
		return fmt.Errorf("%w: %w", ErrTokenInvalid, err)
	}
	if c.ExpiresAt == nil || c.IssuedAt == nil {
		return fmt.Errorf("%w: no exp or no iat", ErrTokenInvalid)
	}
	iat, exp := c.IssuedAt.Time, c.ExpiresAt.Time
	if iat.After(now.Add(ClockSkew)) || exp.Sub(iat) > waitroom.MaxSession {
		return fmt.Errorf("%w: issued %v, expires %v, checked at %v", ErrTokenInvalid, iat, exp, now)
	}
	switch {
	case c.Subject != buyer:
		return fmt.Errorf("%w: the pass is %q's, the buyer %q", ErrTokenOtherBuyer, c.Subject, buyer)
	case c.Sale != saleID:
		return fmt.Errorf("%w: the pass is for sale %q, the purchase in %q", ErrTokenOtherSale, c.Sale, saleID)
	case !now.Before(exp):
		return fmt.Errorf("%w: at %v, checked at %v", ErrTokenExpired, exp, now)
	}
	return nil
}

// JWKS returns the verifier's public keys as a JSON Web Key Set (RFC 7517), each an OKP key of
// curve Ed25519 (RFC 8037) with its key id: what a service that checks passes too fetches.
func (v *Verifier) JWKS() []byte {
	keys := make([]ed25519.PublicKey, len(v.order))
	for i, id := range v.order {
		keys[i] = v.keys[id]
	}
	return JWKS(keys...)
}

// JWK is one key of a JWKS document, as JWKS writes it.
type JWK struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
}

// JWKS returns keys as a JSON Web Key Set document: {"keys":[{"kty":"OKP","crv":"Ed25519",...}]}.
func JWKS(keys ...ed25519.PublicKey) []byte {
	doc := struct {
		Keys []JWK `json:"keys"`
	}{Keys: make([]JWK, 0, len(keys))}
	for _, k := range keys {
		doc.Keys = append(doc.Keys, JWK{Kty: "OKP", Crv: "Ed25519", X: b64(k), Kid: KeyID(k), Use: "sig", Alg: "EdDSA"})
	}
	b, _ := json.Marshal(doc) // strings only: it cannot fail
	return b
}

// PublicKey reads the Ed25519 public key of one JWKS key, checking that it is one and that its
// key id is its thumbprint.
func (k JWK) PublicKey() (ed25519.PublicKey, error) {
	if k.Kty != "OKP" || k.Crv != "Ed25519" {
		return nil, fmt.Errorf("admit: a %s key on curve %q is not Ed25519", k.Kty, k.Crv)
	}
	x, err := base64.RawURLEncoding.DecodeString(k.X)
	if err != nil || len(x) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("admit: x %q is not an Ed25519 public key", k.X)
	}
	if k.Kid != "" && k.Kid != KeyID(x) {
		return nil, fmt.Errorf("admit: kid %q is not the key's thumbprint", k.Kid)
	}
	return ed25519.PublicKey(x), nil
}
