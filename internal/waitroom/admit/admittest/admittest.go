// Package admittest makes admission-pass keys for tests.
package admittest

import (
	"crypto/ed25519"
	"crypto/rand"
	"testing"

	"github.com/seckill-go/seckill-go/internal/waitroom/admit"
)

// Keys returns a signer over a fresh Ed25519 key and a verifier of its passes.
func Keys(tb testing.TB) (*admit.Signer, *admit.Verifier) {
	tb.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	signer, err := admit.NewSigner(key)
	if err != nil {
		tb.Fatal(err)
	}
	verifier, err := admit.NewVerifier(signer.Public())
	if err != nil {
		tb.Fatal(err)
	}
	return signer, verifier
}
