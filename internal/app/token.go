package app

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/seckill-go/seckill-go/internal/buyer"
	"github.com/seckill-go/seckill-go/internal/config"
)

// stampedeTokens gives the stampede's buyers their tokens when purchases need one: signed with the
// shared key, valid for 10 minutes (a stampede's buyers are done long before). With a public key
// the replica cannot sign, and a stampede's purchases are refused with 401 (serve warns at start).
func stampedeTokens(c buyer.Config) (func(string) (string, error), error) {
	if len(c.HMACKey) == 0 {
		return nil, nil
	}
	s, err := buyer.NewSigner(c)
	if err != nil {
		return nil, err
	}
	return func(userID string) (string, error) { return s.Token(userID, 10*time.Minute) }, nil
}

// token prints a buyer token for each user id given: the dev stack's stand-in for a shop's login
// service, signed with SECKILL_BUYER_JWT_HMAC_KEY (and its issuer and audience, if set). A shop
// whose tokens come from elsewhere, verified with a public key, has no use for it.
//
//	seckill token [-ttl 1h] alice bob
func token(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("seckill token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	ttl := fs.Duration("ttl", time.Hour, "how long each token is valid: at most SECKILL_BUYER_JWT_MAX_TTL (24h by default), which the replicas enforce")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: seckill token [-ttl 1h] USER_ID...  (signed with SECKILL_BUYER_JWT_HMAC_KEY; one token per line)")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 || *ttl <= 0 {
		fs.Usage()
		return errors.New("token: give one or more user ids and a positive -ttl")
	}
	// The buyer settings only: a token needs no database, broker or admin token.
	c, err := config.BuyerTokens(getenv)
	if err != nil {
		return err
	}
	s, err := buyer.NewSigner(c)
	if err != nil {
		return fmt.Errorf("token: SECKILL_BUYER_JWT_HMAC_KEY: %w", err)
	}
	for _, id := range fs.Args() {
		tok, err := s.Token(id, *ttl)
		if err != nil {
			return fmt.Errorf("token for %q: %w", id, err)
		}
		fmt.Fprintln(stdout, tok)
	}
	return nil
}
