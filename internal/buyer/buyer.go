// Package buyer says who a buyer is when the shop vouches for it: a bearer token (a JWT) signed by
// the shop's login service, whose subject is the buyer's user id. Without a token the user id of a
// purchase is only a claim the client makes, and "one per user" stops no bot that invents ids.
//
// The package verifies tokens; it never decides a purchase. Its Signer exists for the dev stack,
// the load test and the tests, which have no login service: production tokens come from elsewhere.
package buyer

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/seckill-go/seckill-go/internal/sale"
)

// MinHMACKey is the shortest shared key accepted: HS256 is as strong as its key, and a short one
// can be guessed offline from any token.
const MinHMACKey = 32

// Config says how buyer tokens are verified: a shared HMAC key or a public key, never both. The
// zero value verifies nothing (Enabled is false): user ids are claims.
type Config struct {
	// HMACKey is the key shared with the login service (HS256, HS384, HS512).
	HMACKey []byte
	// PublicKeyPEM is the login service's public key, PEM-encoded (PKIX "PUBLIC KEY" or PKCS #1
	// "RSA PUBLIC KEY"): RSA (RS*, PS*), ECDSA (ES*) or Ed25519 (EdDSA).
	PublicKeyPEM []byte
	// Issuer and Audience, when set, must be the token's iss and one of its aud.
	Issuer, Audience string
	// Leeway is the clock skew tolerated on exp, nbf and iat.
	Leeway time.Duration
	// MaxTTL is the longest lifetime a token may claim: exp − iat, or exp − now for a token
	// without iat (0: DefaultMaxTTL). A stolen token is good until its exp; a login service
	// that issues tokens for years, by mistake or by a forger's hand with its key, is refused.
	MaxTTL time.Duration
}

// DefaultMaxTTL is Config.MaxTTL's default: a day, longer than any shopping session.
const DefaultMaxTTL = 24 * time.Hour

func (c Config) maxTTL() time.Duration {
	if c.MaxTTL <= 0 {
		return DefaultMaxTTL
	}
	return c.MaxTTL
}

// Enabled reports whether tokens are required.
func (c Config) Enabled() bool { return len(c.HMACKey) > 0 || len(c.PublicKeyPEM) > 0 }

// ErrNoToken means a request carried no bearer token where one is required.
var ErrNoToken = errors.New("no buyer token")

// ErrInvalidToken means a token did not verify: bad signature, wrong algorithm, expired, wrong
// issuer or audience, a time claim that is not a JSON number, a lifetime over Config.MaxTTL, or a
// subject that is not a valid user id.
var ErrInvalidToken = errors.New("invalid buyer token")

// Verifier checks buyer tokens. It is safe for concurrent use.
type Verifier struct {
	key            any
	parser         *jwt.Parser
	maxTTL, leeway time.Duration
	now            func() time.Time
}

// NewVerifier builds the verifier c describes. The accepted algorithms follow from the key's type
// only, so a token cannot choose its own way to be checked (no "none", no HMAC with a public key
// as the secret).
func NewVerifier(c Config) (*Verifier, error) {
	var (
		key     any
		methods []string
	)
	switch {
	case len(c.HMACKey) > 0 && len(c.PublicKeyPEM) > 0:
		return nil, errors.New("buyer tokens: give an HMAC key or a public key, not both")
	case len(c.HMACKey) > 0:
		if len(c.HMACKey) < MinHMACKey {
			return nil, fmt.Errorf("buyer tokens: the HMAC key must be at least %d bytes", MinHMACKey)
		}
		key, methods = c.HMACKey, []string{"HS256", "HS384", "HS512"}
	case len(c.PublicKeyPEM) > 0:
		pub, err := parsePublicKey(c.PublicKeyPEM)
		if err != nil {
			return nil, fmt.Errorf("buyer tokens: %w", err)
		}
		key, methods = pub, methodsFor(pub)
	default:
		return nil, errors.New("buyer tokens: no key")
	}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(methods),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(c.Leeway),
	}
	if c.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(c.Issuer))
	}
	if c.Audience != "" {
		opts = append(opts, jwt.WithAudience(c.Audience))
	}
	return &Verifier{key: key, parser: jwt.NewParser(opts...), maxTTL: c.maxTTL(), leeway: c.Leeway, now: time.Now}, nil
}

// UserID verifies token and returns its subject, the buyer's user id. Every failure is
// ErrInvalidToken, wrapped with what failed (for the log; the client is told less).
//
// The claims are read as jwt.MapClaims, whose exp, nbf and iat must be JSON numbers (RFC 7519's
// NumericDate): jwt.RegisteredClaims also reads a string of digits as a date, so "exp":"9999…"
// passed. The subject must be a string for the same reason.
func (v *Verifier) UserID(token string) (string, error) {
	if token == "" {
		return "", ErrNoToken
	}
	claims := jwt.MapClaims{}
	if _, err := v.parser.ParseWithClaims(token, claims, func(*jwt.Token) (any, error) { return v.key, nil }); err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	if err := v.checkLifetime(claims); err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	sub, err := claims.GetSubject()
	if err == nil {
		err = sale.ValidateUserID(sub)
	}
	if err != nil {
		return "", fmt.Errorf("%w: subject: %w", ErrInvalidToken, err)
	}
	return sub, nil
}

// checkLifetime refuses a token that claims to be valid for longer than maxTTL: from its iat to
// its exp, or, without an iat, from now to its exp (give or take the leeway, for the issuer's
// clock). The parser has checked already that exp is present and both are numbers.
func (v *Verifier) checkLifetime(claims jwt.MapClaims) error {
	exp, err := claims.GetExpirationTime()
	if err != nil || exp == nil {
		return fmt.Errorf("exp: %w", jwt.ErrTokenRequiredClaimMissing)
	}
	iat, err := claims.GetIssuedAt()
	if err != nil {
		return err
	}
	from, limit := v.now(), v.maxTTL+v.leeway
	if iat != nil {
		from, limit = iat.Time, v.maxTTL
	}
	if ttl := exp.Sub(from); ttl > limit {
		return fmt.Errorf("a lifetime of %v is over the longest accepted, %v", ttl.Round(time.Second), v.maxTTL)
	}
	return nil
}

func parsePublicKey(data []byte) (crypto.PublicKey, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("the public key is not PEM")
	}
	switch block.Type {
	case "PUBLIC KEY":
		pub, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("public key: %w", err)
		}
		return pub, nil
	case "RSA PUBLIC KEY":
		pub, err := x509.ParsePKCS1PublicKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("public key: %w", err)
		}
		return pub, nil
	}
	return nil, fmt.Errorf("PEM block %q is not a public key", block.Type)
}

func methodsFor(pub crypto.PublicKey) []string {
	switch pub.(type) {
	case *rsa.PublicKey:
		return []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}
	case *ecdsa.PublicKey:
		return []string{"ES256", "ES384", "ES512"}
	case ed25519.PublicKey:
		return []string{"EdDSA"}
	}
	return nil // a key type jwt cannot verify: every token is refused
}

// Signer mints HS256 buyer tokens with a shared key: the dev stack's stand-in for a login service
// (`seckill token`), and the load test's buyers.
type Signer struct {
	key              []byte
	issuer, audience string
	maxTTL           time.Duration
	now              func() time.Time
}

// NewSigner builds a signer for c's HMAC key, issuer and audience.
func NewSigner(c Config) (*Signer, error) {
	if len(c.HMACKey) < MinHMACKey {
		return nil, fmt.Errorf("buyer tokens: signing needs an HMAC key of at least %d bytes", MinHMACKey)
	}
	return &Signer{key: c.HMACKey, issuer: c.Issuer, audience: c.Audience, maxTTL: c.maxTTL(), now: time.Now}, nil
}

// Token returns a token saying that userID is the buyer, valid for ttl. A ttl over the config's
// MaxTTL is refused: the verifiers of that config would refuse the token.
func (s *Signer) Token(userID string, ttl time.Duration) (string, error) {
	if err := sale.ValidateUserID(userID); err != nil {
		return "", err
	}
	if ttl > s.maxTTL {
		return "", fmt.Errorf("buyer tokens: a lifetime of %v is over the longest accepted, %v (SECKILL_BUYER_JWT_MAX_TTL)", ttl, s.maxTTL)
	}
	now := s.now()
	claims := jwt.RegisteredClaims{
		Subject:   userID,
		Issuer:    s.issuer,
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	}
	if s.audience != "" {
		claims.Audience = jwt.ClaimStrings{s.audience}
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(s.key)
}
