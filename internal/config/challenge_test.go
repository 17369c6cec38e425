package config

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/waitroom/challenge/turnstile"
)

// TestBotChallenge: off by default; each kind's settings are checked only when it is chosen, and
// their secrets never reach the start-up log.
func TestBotChallenge(t *testing.T) {
	base := map[string]string{"SECKILL_ADMIN_TOKEN": "12345678"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	c, err := Load("test", nil, env(base), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if ch := c.Challenge; ch.Kind != ChallengeOff || ch.AltchaMaxNumber != 100_000 || ch.AltchaExpires != 2*time.Minute || ch.TurnstileURL != turnstile.DefaultURL {
		t.Errorf("defaults: %+v", ch)
	}
	// A kind not chosen ignores its settings.
	if _, err := Load("test", nil, env(with("SECKILL_ALTCHA_KEY", "short", "SECKILL_TURNSTILE_URL", "nonsense")), io.Discard); err != nil {
		t.Errorf("off, with the kinds' settings wrong: %v", err)
	}
	key := strings.Repeat("altcha-secret-", 3)
	c, err = Load("test", nil, env(with("SECKILL_BOT_CHALLENGE", "altcha", "SECKILL_ALTCHA_KEY", key, "SECKILL_ALTCHA_MAX_NUMBER", "5000")), io.Discard)
	if err != nil || c.Challenge.Kind != ChallengeAltcha || c.Challenge.AltchaKey != key || c.Challenge.AltchaMaxNumber != 5000 {
		t.Fatalf("altcha: %+v %v", c.Challenge, err)
	}
	c2, err := Load("test", nil, env(with("SECKILL_BOT_CHALLENGE", "turnstile", "SECKILL_TURNSTILE_SECRET", "turnstile-secret-value")), io.Discard)
	if err != nil || c2.Challenge.Kind != ChallengeTurnstile {
		t.Fatalf("turnstile: %+v %v", c2.Challenge, err)
	}
	var sb strings.Builder
	slog.New(slog.NewTextHandler(&sb, nil)).Info("start", "a", c, "b", c2)
	for _, secret := range []string{key, "turnstile-secret-value"} {
		if strings.Contains(sb.String(), secret) {
			t.Errorf("the start-up log shows %q", secret)
		}
	}

	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"unknown kind", with("SECKILL_BOT_CHALLENGE", "recaptcha"), "SECKILL_BOT_CHALLENGE"},
		{"short ALTCHA key", with("SECKILL_BOT_CHALLENGE", "altcha", "SECKILL_ALTCHA_KEY", "short"), "SECKILL_ALTCHA_KEY"},
		{"ALTCHA too easy", with("SECKILL_BOT_CHALLENGE", "altcha", "SECKILL_ALTCHA_MAX_NUMBER", "999"), "SECKILL_ALTCHA_MAX_NUMBER"},
		{"ALTCHA too hard", with("SECKILL_BOT_CHALLENGE", "altcha", "SECKILL_ALTCHA_MAX_NUMBER", "10000001"), "SECKILL_ALTCHA_MAX_NUMBER"},
		{"ALTCHA expiry too short", with("SECKILL_BOT_CHALLENGE", "altcha", "SECKILL_ALTCHA_EXPIRES", "5s"), "SECKILL_ALTCHA_EXPIRES"},
		{"ALTCHA expiry too long", with("SECKILL_BOT_CHALLENGE", "altcha", "SECKILL_ALTCHA_EXPIRES", "2h"), "SECKILL_ALTCHA_EXPIRES"},
		{"Turnstile without a secret", with("SECKILL_BOT_CHALLENGE", "turnstile"), "SECKILL_TURNSTILE_SECRET"},
		{"Turnstile URL not HTTP", with("SECKILL_BOT_CHALLENGE", "turnstile", "SECKILL_TURNSTILE_SECRET", "s", "SECKILL_TURNSTILE_URL", "ftp://x/y"), "SECKILL_TURNSTILE_URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load("test", nil, env(tc.env), io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load() error = %v, want one mentioning %s", err, tc.want)
			}
			if k := tc.env["SECKILL_ALTCHA_KEY"]; k != "" && strings.Contains(err.Error(), k) {
				t.Errorf("the refusal shows the key: %v", err)
			}
		})
	}
}
