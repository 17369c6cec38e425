package app

import (
	"crypto/rand"

	"github.com/seckill-go/seckill-go/internal/config"
	"github.com/seckill-go/seckill-go/internal/httpapi"
	"github.com/seckill-go/seckill-go/internal/waitroom/challenge"
	"github.com/seckill-go/seckill-go/internal/waitroom/challenge/redisspent"
	"github.com/seckill-go/seckill-go/internal/waitroom/challenge/turnstile"
)

// botChallenge gives the API the bot challenge a join must pass (SECKILL_BOT_CHALLENGE): none,
// the default; ALTCHA, issued and verified here, its spent challenges in the main Redis under
// the database's name, so that a solution passes once across every replica; or Turnstile,
// verified with its siteverify endpoint.
func (r *resources) botChallenge(deps *httpapi.Deps) error {
	cfg := r.cfg.Challenge
	switch cfg.Kind {
	case config.ChallengeAltcha:
		key := []byte(cfg.AltchaKey)
		if len(key) == 0 {
			key = make([]byte, 32)
			if _, err := rand.Read(key); err != nil {
				return err
			}
			r.log.Warn("SECKILL_ALTCHA_KEY is not set: this replica signs its ALTCHA challenges with a key of its own; the other replicas refuse their solutions, and it refuses theirs")
		}
		spent, err := redisspent.New(r.rdb, r.cfg.DatabaseName())
		if err != nil {
			return err
		}
		a, err := challenge.NewAltcha(key, spent, challenge.AltchaOptions{MaxNumber: int64(cfg.AltchaMaxNumber), Expires: cfg.AltchaExpires})
		if err != nil {
			return err
		}
		deps.JoinChallenge, deps.Challenges = a, a
	case config.ChallengeTurnstile:
		v, err := turnstile.New(cfg.TurnstileSecret, turnstile.Options{URL: cfg.TurnstileURL})
		if err != nil {
			return err
		}
		deps.JoinChallenge = v
	}
	return nil
}
