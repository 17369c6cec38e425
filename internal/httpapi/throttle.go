package httpapi

import (
	"context"
	"net/netip"
	"sync"
	"time"
)

// AdminThrottle slows down the guessing of the admin token: it counts the wrong tokens each
// client sends and makes it wait, longer and longer, once it has sent a few. The admin routes ask
// it before they look at the token, so that a client made to wait learns nothing about the token
// it sends meanwhile. An implementation that cannot answer (its store is down) returns an error
// wrapping sale.ErrUnavailable: the admin call is then refused with 503, never let through.
type AdminThrottle interface {
	// Wait returns how long client must still wait before its admin requests are looked at
	// again; 0 means now.
	Wait(ctx context.Context, client string) (time.Duration, error)
	// Failed records a wrong token from client and returns the wait it now imposes (0: none yet).
	Failed(ctx context.Context, client string) (time.Duration, error)
	// Succeeded forgets client's wrong tokens.
	Succeeded(ctx context.Context, client string) error
}

// ThrottleConfig tunes the in-memory AdminThrottle.
type ThrottleConfig struct {
	// Free is how many wrong tokens a client may send before it waits [5].
	Free int
	// FirstWait is the wait after the Free-th wrong token; it doubles with every further one
	// [1s], up to MaxWait [15m].
	FirstWait, MaxWait time.Duration
	// Forget is how long a client must send no wrong token, after its last wait has ended, for
	// its count to start again from 0 [15m].
	Forget time.Duration
	// MaxClients bounds the clients remembered [10,000]; beyond it, the stalest are forgotten.
	MaxClients int
}

func (c ThrottleConfig) withDefaults() ThrottleConfig {
	if c.Free <= 0 {
		c.Free = 5
	}
	if c.FirstWait <= 0 {
		c.FirstWait = time.Second
	}
	if c.MaxWait <= 0 {
		c.MaxWait = 15 * time.Minute
	}
	if c.Forget <= 0 {
		c.Forget = 15 * time.Minute
	}
	if c.MaxClients <= 0 {
		c.MaxClients = 10_000
	}
	return c
}

// memThrottle is the AdminThrottle of one replica, in memory: a client that spreads its guesses
// over N replicas gets N times the attempts (at most 5 free ones each: the
// backoff still caps the rate at which they can guess).
type memThrottle struct {
	cfg ThrottleConfig
	now func() time.Time

	mu        sync.Mutex
	clients   map[string]strikes
	lastSweep time.Time
}

type strikes struct {
	n     int       // wrong tokens counted
	last  time.Time // the last one
	until time.Time // no admin request is looked at before then
}

// NewMemoryThrottle returns the in-memory AdminThrottle; now defaults to time.Now.
func NewMemoryThrottle(cfg ThrottleConfig, now func() time.Time) AdminThrottle {
	if now == nil {
		now = time.Now
	}
	return &memThrottle{cfg: cfg.withDefaults(), now: now, clients: map[string]strikes{}}
}

func (t *memThrottle) Wait(_ context.Context, client string) (time.Duration, error) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.clients[client]
	if !ok || !now.Before(s.until) {
		return 0, nil
	}
	return s.until.Sub(now), nil
}

func (t *memThrottle) Failed(_ context.Context, client string) (time.Duration, error) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.clients[client]
	if !ok {
		t.makeRoom(now)
	}
	if t.forgotten(s, now) {
		s = strikes{}
	}
	s.n++
	s.last = now
	var wait time.Duration
	if extra := s.n - t.cfg.Free; extra >= 0 {
		wait = t.cfg.MaxWait
		if extra < 30 && t.cfg.FirstWait<<extra < t.cfg.MaxWait {
			wait = t.cfg.FirstWait << extra
		}
		s.until = now.Add(wait)
	}
	t.clients[client] = s
	return wait, nil
}

func (t *memThrottle) Succeeded(_ context.Context, client string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.clients, client)
	return nil
}

// forgotten reports whether s has been quiet for cfg.Forget since its last wrong token and
// since its wait ended.
func (t *memThrottle) forgotten(s strikes, now time.Time) bool {
	return now.Sub(s.last) > t.cfg.Forget && now.Sub(s.until) > t.cfg.Forget
}

// makeRoom sweeps the forgotten clients, at most once per cfg.Forget, and drops one client if
// the map is still full: when an attacker holds that many addresses, map order is as good a
// choice as any, and it keeps the memory bounded without a sweep per new address.
func (t *memThrottle) makeRoom(now time.Time) {
	if now.Sub(t.lastSweep) >= t.cfg.Forget {
		t.lastSweep = now
		for c, s := range t.clients {
			if t.forgotten(s, now) {
				delete(t.clients, c)
			}
		}
	}
	for c := range t.clients {
		if len(t.clients) < t.cfg.MaxClients {
			break
		}
		delete(t.clients, c)
	}
}

// throttleKey is the client an address stands for: an IPv4 address, or the /64 of an IPv6 one,
// since one host commonly holds a whole /64. Anything else (no address) is kept as it is.
func throttleKey(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	a = a.Unmap()
	if a.Is4() {
		return a.String()
	}
	p, err := a.Prefix(64)
	if err != nil {
		return ip
	}
	return p.String()
}
