// Package config reads seckill-go's settings once, from SECKILL_* environment variables (and
// OpenTelemetry's OTEL_EXPORTER_OTLP_ENDPOINT) that command-line flags may override, validates
// them, and renders them for the start-up log with secrets masked. Nothing else in the program
// reads the environment, but for the OTLP exporter, which reads OpenTelemetry's other
// OTEL_EXPORTER_OTLP_* variables (headers, timeout, TLS) itself.
package config

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill-go/seckill-go/internal/buyer"
	"github.com/seckill-go/seckill-go/internal/redisconn"
	"github.com/seckill-go/seckill-go/internal/sale"
)

// Config is every setting of the program.
type Config struct {
	HTTP struct {
		Addr            string
		ShutdownTimeout time.Duration
		// PprofAddr, when set, serves net/http/pprof on a listener of its own (never on the API's).
		PprofAddr string
		// PlantedSlowdown, above 0, makes every request cost that fraction more CPU
		// (httpapi.PlantedSlowdown): the known slowdown make bench-compare must see. 0: off.
		PlantedSlowdown float64
	}
	MySQL struct {
		DSN          string
		MaxOpenConns int
	}
	// Redis is where the app's Redis is: one server, a cluster or a Sentinel-watched master
	// (Topology, made by validate from the settings below).
	Redis struct {
		Mode     string
		Addr     string
		Addrs    []string
		Master   string
		Password string
		Topology redisconn.Topology
	}
	ZK struct {
		Servers        []string
		SessionTimeout time.Duration
	}
	// ZooLocks are the lock zoo's own servers: the independent Redis servers of the redlock
	// strategy and the Memcached of the memcached one. Nothing else uses them.
	ZooLocks struct {
		RedlockAddrs  []string
		MemcachedAddr string
	}
	Kafka struct {
		Brokers    []string
		Topic      string
		GroupID    string
		Partitions int
	}
	Sale struct {
		DefaultStrategy sale.Strategy
		AllowUnsafe     bool
		LockWait        time.Duration
		LockTTL         time.Duration
		// BatchMax is the most purchases of one product combined into one deduction; 1 is the
		// textbook one-buyer-per-transaction behaviour.
		BatchMax int
		// BatchInflight is how many batches of one product may run at once per replica.
		BatchInflight int
		// BatchLinger is how long a batch waits for more purchases before it runs; 0 combines only
		// what queued up while the previous batch of the product ran.
		BatchLinger time.Duration
		// Refresh is how often a replica re-reads the sale state it keeps in memory: the bound on
		// how stale it can be when a change broadcast is missed.
		Refresh time.Duration
	}
	// Test holds settings that exist only for tests and the lock zoo; never set them in production.
	Test struct {
		// ClockOffset is added to this process's clock by the locks that trust it (redis-getset):
		// a replica whose clock is off.
		ClockOffset time.Duration
	}
	// Limits are the abuse limits. The per-user and per-client rates are shared by every
	// replica through Redis (each replica limits on its own while Redis is away).
	Limits struct {
		PerUserRate    float64
		PerUserBurst   int
		PerClientRate  float64
		PerClientBurst int
		// TrustedProxies are the peers whose X-Forwarded-For names the client.
		TrustedProxies []netip.Prefix
		// Exempt are the client addresses the per-client limit lets through.
		Exempt      []netip.Prefix
		MaxInflight int
	}
	// Read configures the read side (docs/read-path.md): the board every public read is
	// answered from, the per-client limit of reads, and the event streams.
	Read struct {
		// Refresh is how often a replica's board re-reads the products: its staleness bound.
		Refresh        time.Duration
		PerClientRate  float64
		PerClientBurst int
		// StreamsMax and StreamsPerClient bound the open event streams of a replica, in all and
		// per client address.
		StreamsMax       int
		StreamsPerClient int
		Heartbeat        time.Duration
		// StreamMinGap is the period of one stream's writes of changes.
		StreamMinGap time.Duration
	}
	// Live configures the storefront's live figures: a Redis pool of their own.
	Live struct {
		RedisPool    int
		RedisTimeout time.Duration
	}
	// Stampede configures the storefront's demo load burst.
	Stampede struct {
		// Peers are the base URLs of every replica the buyers are spread over; empty means this
		// replica only.
		Peers     []string
		MaxBuyers int
	}
	// Run says which parts of the process run: the HTTP API, the outbox relay, the order consumer.
	Run struct {
		API      bool
		Relay    bool
		Consumer bool
		// Persister moves redis-lua's accepted purchases from their Redis Streams to MySQL.
		Persister bool
		// Expirer expires unpaid orders and returns the units of expired and cancelled ones.
		Expirer bool
	}
	// RedisLua says when a redis-lua purchase is answered accepted: with MinReplicas above 0,
	// only once that many replicas of the sale's Redis master acknowledged it (WAIT), within
	// WaitTimeout; otherwise it is answered 503 unconfirmed.
	RedisLua struct {
		MinReplicas int
		WaitTimeout time.Duration
	}
	// Persist tunes the redis-lua persister.
	Persist struct {
		// Every is the interval of the sweep over every redis-lua product's stream (a replica's
		// own purchases are persisted as soon as they are accepted).
		Every time.Duration
		// ClaimAfter is how long an entry may stay read and unacknowledged by a persister before
		// another takes it over, taking the first for dead.
		ClaimAfter time.Duration
		// Linger is how long a woken persister lets purchases gather before it writes them.
		Linger time.Duration
		// Burst is the rate of purchases a process accepts, per second, above which its persister
		// holds off (negative: never), MaxLag at the most.
		Burst  float64
		MaxLag time.Duration
	}
	// Payment is the order lifecycle: the payment window, the simulated provider, and
	// the expirer that expires unpaid orders and returns their units.
	Payment struct {
		// Window is how long an order waits for payment once it exists.
		Window time.Duration
		// Latency and FailureRate shape the simulated provider: its mean time per charge, and the
		// share of charges it declines.
		Latency     time.Duration
		FailureRate float64
		// ExpireEvery is the expirer's interval.
		ExpireEvery time.Duration
	}
	// Reconcile is the reconciliation loop (internal/reconcile): the audit's invariants checked
	// on the live sales every Every; 0 runs none in this process.
	Reconcile struct {
		Every time.Duration
	}
	// Buyer says how a buyer's identity is verified: unset, a purchase's user_id is the client's
	// claim; set, it comes from a signed bearer token.
	Buyer struct {
		JWTHMACKey       string
		JWTPublicKeyFile string
		JWTIssuer        string
		JWTAudience      string
		JWTLeeway        time.Duration
		JWTMaxTTL        time.Duration
		// Tokens is what the settings above give, read once by Load (the public key file
		// included).
		Tokens buyer.Config
	}
	// Waitroom configures the sales' waiting rooms (issue #32).
	Waitroom struct {
		// Key is the Ed25519 seed (RFC 8032's 32-byte private key) that signs admission passes:
		// the same on every replica, so that any replica takes a pass another signed. Nil: the
		// process draws a key of its own, and its passes are refused by every other replica.
		Key []byte
		// Tick is how often each replica admits the visitors of its waiting-room sales.
		Tick time.Duration
	}
	// Challenge is the optional bot challenge a join of a waiting room's queue must pass (issue
	// #32): off by default.
	Challenge struct {
		// Kind is ChallengeOff, ChallengeAltcha or ChallengeTurnstile.
		Kind string
		// AltchaKey signs the ALTCHA challenges: the same on every replica, since any replica
		// verifies what another issued. Empty: the process draws one of its own.
		AltchaKey string
		// AltchaMaxNumber is the proof of work's difficulty: MaxNumber/2 SHA-256 on average.
		AltchaMaxNumber int
		// AltchaExpires is how long a challenge may be solved and used.
		AltchaExpires time.Duration
		// TurnstileSecret is the site's Turnstile secret key; TurnstileURL its siteverify endpoint.
		TurnstileSecret string
		TurnstileURL    string
	}
	// Tracing is OpenTelemetry tracing (internal/tracing): off by default.
	Tracing struct {
		// Exporter is tracing.Off or tracing.OTLP.
		Exporter string
		// Sample is the fraction of the requests that start a trace.
		Sample float64
		// Endpoint is the OTLP/HTTP collector, from the standard OTEL_EXPORTER_OTLP_ENDPOINT.
		Endpoint string
	}
	AdminToken  string
	InstanceID  string
	AutoMigrate bool
	LogLevel    slog.Level

	settings []*setting
}

// setting is one configurable value: its environment variable, its flag, its default, and how to
// store a string into the Config.
type setting struct {
	env, flag, def, usage string
	secret                bool
	set                   func(string) error
	value                 string
}

func (c *Config) table() []*setting {
	host, _ := os.Hostname()
	return []*setting{
		{env: "SECKILL_HTTP_ADDR", flag: "http-addr", def: ":8080", usage: "HTTP listen address (host:port; port 0 picks a free one)", set: str(&c.HTTP.Addr)},
		{env: "SECKILL_SHUTDOWN_TIMEOUT", flag: "shutdown-timeout", def: "15s", usage: "grace period for in-flight requests at shutdown", set: dur(&c.HTTP.ShutdownTimeout)},
		{env: "SECKILL_PPROF_ADDR", flag: "pprof-addr", def: "", usage: "serve net/http/pprof on this address (host:port; empty: off). Keep it on loopback", set: str(&c.HTTP.PprofAddr)},
		{env: "SECKILL_PLANTED_SLOWDOWN", flag: "planted-slowdown", def: "0", usage: "a known slowdown for make bench-compare to find: every request spins this fraction of the process's CPU time per request more (0: off; never in production)", set: float(&c.HTTP.PlantedSlowdown)},
		{env: "SECKILL_MYSQL_DSN", flag: "mysql-dsn", def: "root:@tcp(127.0.0.1:3306)/seckill", usage: "MySQL/MariaDB DSN (go-sql-driver format)", secret: true, set: str(&c.MySQL.DSN)},
		{env: "SECKILL_MYSQL_MAX_OPEN_CONNS", flag: "mysql-max-open-conns", def: "32", usage: "MySQL connection pool size per process", set: integer(&c.MySQL.MaxOpenConns)},
		{env: "SECKILL_REDIS_MODE", flag: "redis-mode", def: "single", usage: "Redis topology: single (one server, SECKILL_REDIS_ADDR), cluster (a Redis Cluster, seeds SECKILL_REDIS_ADDRS) or sentinel (the master SECKILL_REDIS_MASTER of the sentinels SECKILL_REDIS_ADDRS)", set: str(&c.Redis.Mode)},
		{env: "SECKILL_REDIS_ADDR", flag: "redis-addr", def: "127.0.0.1:6379", usage: "Redis address (host:port) in single mode, and the one seed or sentinel when SECKILL_REDIS_ADDRS is empty", set: str(&c.Redis.Addr)},
		{env: "SECKILL_REDIS_ADDRS", flag: "redis-addrs", def: "", usage: "cluster mode: seed nodes; sentinel mode: the sentinels (host:port, comma-separated; empty: SECKILL_REDIS_ADDR)", set: list(&c.Redis.Addrs)},
		{env: "SECKILL_REDIS_MASTER", flag: "redis-master", def: "seckill", usage: "sentinel mode: the name the sentinels know the master by", set: str(&c.Redis.Master)},
		{env: "SECKILL_REDIS_PASSWORD", flag: "redis-password", def: "", usage: "Redis password", secret: true, set: str(&c.Redis.Password)},
		{env: "SECKILL_ZK_SERVERS", flag: "zk-servers", def: "127.0.0.1:2181", usage: "ZooKeeper servers, comma-separated", set: list(&c.ZK.Servers)},
		{env: "SECKILL_REDLOCK_ADDRS", flag: "redlock-addrs", def: "127.0.0.1:6390,127.0.0.1:6391,127.0.0.1:6392,127.0.0.1:6393,127.0.0.1:6394", usage: "the redlock strategy's independent Redis servers (host:port, comma-separated; an odd number, 5 in the write-ups)", set: list(&c.ZooLocks.RedlockAddrs)},
		{env: "SECKILL_MEMCACHED_ADDR", flag: "memcached-addr", def: "127.0.0.1:11211", usage: "the memcached strategy's Memcached (host:port)", set: str(&c.ZooLocks.MemcachedAddr)},
		{env: "SECKILL_ZK_SESSION_TIMEOUT", flag: "zk-session-timeout", def: "10s", usage: "ZooKeeper session timeout", set: dur(&c.ZK.SessionTimeout)},
		{env: "SECKILL_KAFKA_BROKERS", flag: "kafka-brokers", def: "127.0.0.1:9092", usage: "Kafka bootstrap brokers, comma-separated", set: list(&c.Kafka.Brokers)},
		{env: "SECKILL_KAFKA_TOPIC", flag: "kafka-topic", def: "seckill.orders", usage: "Kafka topic of order events", set: str(&c.Kafka.Topic)},
		{env: "SECKILL_KAFKA_GROUP", flag: "kafka-group", def: "seckill-orders", usage: "Kafka consumer group of the order consumer", set: str(&c.Kafka.GroupID)},
		{env: "SECKILL_KAFKA_PARTITIONS", flag: "kafka-partitions", def: "6", usage: "partitions of the topic when it has to be created", set: integer(&c.Kafka.Partitions)},
		{env: "SECKILL_ADMIN_TOKEN", flag: "admin-token", def: "", usage: "bearer token of the admin API (required, at least 8 characters)", secret: true, set: str(&c.AdminToken)},
		{env: "SECKILL_BUYER_JWT_HMAC_KEY", flag: "buyer-jwt-hmac-key", def: "", usage: "verify buyer tokens (HS256/384/512) with this shared key, at least 32 bytes; a purchase's user id then comes from the token (empty, and no public key: user ids are the client's claim)", secret: true, set: str(&c.Buyer.JWTHMACKey)},
		{env: "SECKILL_BUYER_JWT_PUBLIC_KEY_FILE", flag: "buyer-jwt-public-key-file", def: "", usage: "verify buyer tokens with this PEM public key (RSA, ECDSA or Ed25519) instead of a shared key", set: str(&c.Buyer.JWTPublicKeyFile)},
		{env: "SECKILL_BUYER_JWT_ISSUER", flag: "buyer-jwt-issuer", def: "", usage: "required iss of buyer tokens (empty: not checked)", set: str(&c.Buyer.JWTIssuer)},
		{env: "SECKILL_BUYER_JWT_AUDIENCE", flag: "buyer-jwt-audience", def: "", usage: "required aud of buyer tokens (empty: not checked)", set: str(&c.Buyer.JWTAudience)},
		{env: "SECKILL_BUYER_JWT_LEEWAY", flag: "buyer-jwt-leeway", def: "30s", usage: "clock skew tolerated on a buyer token's exp, nbf and iat", set: dur(&c.Buyer.JWTLeeway)},
		{env: "SECKILL_BUYER_JWT_MAX_TTL", flag: "buyer-jwt-max-ttl", def: "24h", usage: "longest lifetime a buyer token may claim (exp - iat, or exp - now without iat); a longer one is refused, and `seckill token` mints none", set: dur(&c.Buyer.JWTMaxTTL)},
		{env: "SECKILL_WAITROOM_KEY", flag: "waitroom-key", def: "", usage: "Ed25519 key that signs the waiting rooms' admission passes: its 32-byte seed in base64 (standard or URL alphabet, padded or not), the same on every replica (empty: a key of this process's own, whose passes the other replicas refuse)", secret: true, set: ed25519Seed(&c.Waitroom.Key)},
		{env: "SECKILL_WAITROOM_TICK", flag: "waitroom-tick", def: "100ms", usage: "how often each replica admits the visitors of its waiting-room sales (10ms to 1s; the rooms count the rate, so more replicas admit no more)", set: dur(&c.Waitroom.Tick)},
		{env: "SECKILL_BOT_CHALLENGE", flag: "bot-challenge", def: ChallengeOff, usage: "the bot challenge a join of a waiting room's queue must pass: off, altcha (a proof of work this server issues at GET /api/v1/waitroom/challenge) or turnstile (Cloudflare's hosted captcha, checked with siteverify)", set: str(&c.Challenge.Kind)},
		{env: "SECKILL_ALTCHA_KEY", flag: "altcha-key", def: "", usage: "HMAC key that signs the ALTCHA challenges, at least 32 bytes, the same on every replica (empty: a key of this process's own, whose challenges the other replicas refuse)", secret: true, set: str(&c.Challenge.AltchaKey)},
		{env: "SECKILL_ALTCHA_MAX_NUMBER", flag: "altcha-max-number", def: "100000", usage: "the ALTCHA proof of work's difficulty: the secret number's range, maxnumber/2 SHA-256 on average (1000 to 10000000)", set: integer(&c.Challenge.AltchaMaxNumber)},
		{env: "SECKILL_ALTCHA_EXPIRES", flag: "altcha-expires", def: "2m", usage: "how long an ALTCHA challenge may be solved and used, and how long a used one is remembered in Redis (10s to 1h)", set: dur(&c.Challenge.AltchaExpires)},
		{env: "SECKILL_TURNSTILE_SECRET", flag: "turnstile-secret", def: "", usage: "the site's Cloudflare Turnstile secret key (required with SECKILL_BOT_CHALLENGE=turnstile)", secret: true, set: str(&c.Challenge.TurnstileSecret)},
		{env: "SECKILL_TURNSTILE_URL", flag: "turnstile-url", def: TurnstileURL, usage: "Turnstile's siteverify endpoint (the tests point it at a local stand-in)", set: str(&c.Challenge.TurnstileURL)},
		{env: "SECKILL_DEFAULT_STRATEGY", flag: "default-strategy", def: "mysql", usage: "strategy of products created without one", set: strategy(&c.Sale.DefaultStrategy)},
		{env: "SECKILL_ALLOW_UNSAFE_STRATEGIES", flag: "allow-unsafe-strategies", def: "false", usage: "serve the unsafe strategies (`none`, which oversells, and the lock zoo's unsafe variants), kept to show how they fail", set: boolean(&c.Sale.AllowUnsafe)},
		{env: "SECKILL_LOCK_WAIT", flag: "lock-wait", def: "3s", usage: "longest wait for a product's lock before answering 429 (back-pressure; nothing deducted)", set: dur(&c.Sale.LockWait)},
		{env: "SECKILL_LOCK_TTL", flag: "lock-ttl", def: "5s", usage: "lease of the locks that expire: redis, redis-reentrant and mysql-lock-table renew it every third of it while held; the zoo's redis-setnx, redis-getset, redlock and memcached never renew it; a dead holder blocks its product that long", set: dur(&c.Sale.LockTTL)},
		{env: "SECKILL_TEST_CLOCK_OFFSET", flag: "test-clock-offset", def: "0s", usage: "test only: added to the clock of the locks that trust the local clock (redis-getset), to show what a skewed replica does", set: dur(&c.Test.ClockOffset)},
		{env: "SECKILL_BATCH_MAX", flag: "batch-max", def: "128", usage: "most purchases of one product combined into one deduction (1: one transaction and one lock per buyer)", set: integer(&c.Sale.BatchMax)},
		{env: "SECKILL_BATCH_INFLIGHT", flag: "batch-inflight", def: "1", usage: "batches of one product under way at once per replica (more overlap a batch's inserts with another's commit, but make smaller batches)", set: integer(&c.Sale.BatchInflight)},
		{env: "SECKILL_BATCH_LINGER", flag: "batch-linger", def: "0s", usage: "how long a batch waits for more purchases before it runs (0: combine only what queued while the previous batch ran)", set: dur(&c.Sale.BatchLinger)},
		{env: "SECKILL_SALE_REFRESH", flag: "sale-refresh", def: "1s", usage: "how often a replica re-reads the sale state it keeps in memory (the staleness bound when a change broadcast is missed)", set: dur(&c.Sale.Refresh)},
		{env: "SECKILL_RATE_PER_USER", flag: "rate-per-user", def: "5", usage: "purchase attempts per second per user, across all replicas (0: no limit)", set: float(&c.Limits.PerUserRate)},
		{env: "SECKILL_RATE_BURST", flag: "rate-burst", def: "10", usage: "burst of the per-user rate limit", set: integer(&c.Limits.PerUserBurst)},
		{env: "SECKILL_RATE_PER_CLIENT", flag: "rate-per-client", def: "20", usage: "purchase attempts per second per client address (an IPv6 /64), across all replicas (0: no limit)", set: float(&c.Limits.PerClientRate)},
		{env: "SECKILL_RATE_CLIENT_BURST", flag: "rate-client-burst", def: "40", usage: "burst of the per-client rate limit", set: integer(&c.Limits.PerClientBurst)},
		{env: "SECKILL_TRUSTED_PROXIES", flag: "trusted-proxies", def: "127.0.0.0/8,::1", usage: "addresses or CIDRs of the proxies whose X-Forwarded-For names the client, comma-separated (none: trust no proxy)", set: prefixes(&c.Limits.TrustedProxies)},
		{env: "SECKILL_RATE_EXEMPT", flag: "rate-exempt", def: "127.0.0.0/8,::1", usage: "client addresses or CIDRs the per-client limit lets through, comma-separated (none: no exemption); the load test and the stampede launcher run on loopback", set: prefixes(&c.Limits.Exempt)},
		{env: "SECKILL_BOARD_REFRESH", flag: "board-refresh", def: "100ms", usage: "how often a replica's board (what every public read and event stream shows) re-reads the products: the staleness bound of the viewers' figures", set: dur(&c.Read.Refresh)},
		{env: "SECKILL_READ_RATE", flag: "read-rate", def: "50", usage: "public reads (products, stats, streams opened) per second per client address, in each replica's memory (0: no limit); SECKILL_RATE_EXEMPT addresses pass", set: float(&c.Read.PerClientRate)},
		{env: "SECKILL_READ_BURST", flag: "read-burst", def: "100", usage: "burst of the per-client read limit", set: integer(&c.Read.PerClientBurst)},
		{env: "SECKILL_STREAMS_MAX", flag: "streams-max", def: "10000", usage: "event streams open at once per replica before refusing with 503", set: integer(&c.Read.StreamsMax)},
		{env: "SECKILL_STREAMS_PER_CLIENT", flag: "streams-per-client", def: "8", usage: "event streams open at once per client address before refusing with 429; SECKILL_RATE_EXEMPT addresses are not counted", set: integer(&c.Read.StreamsPerClient)},
		{env: "SECKILL_STREAM_HEARTBEAT", flag: "stream-heartbeat", def: "15s", usage: "longest silence of an event stream before a comment keeps it alive", set: dur(&c.Read.Heartbeat)},
		{env: "SECKILL_STREAM_MIN_GAP", flag: "stream-min-gap", def: "700ms", usage: "period of an event stream's writes: what changed goes out at the stream's own moment of each period, in one write (a write is a system call per viewer; the wait adds to the viewers' lag)", set: dur(&c.Read.StreamMinGap)},
		{env: "SECKILL_MAX_INFLIGHT", flag: "max-inflight", def: "2000", usage: "purchases in progress per replica before shedding with 429 (0: no limit)", set: integer(&c.Limits.MaxInflight)},
		{env: "SECKILL_LIVE_REDIS_POOL", flag: "live-redis-pool", def: "8", usage: "connections of the live figures' own Redis pool (storefront rates, stampede progress)", set: integer(&c.Live.RedisPool)},
		{env: "SECKILL_LIVE_REDIS_TIMEOUT", flag: "live-redis-timeout", def: "500ms", usage: "read and write timeout of the live figures' Redis calls: a slow Redis costs the stats this, never a purchase", set: dur(&c.Live.RedisTimeout)},
		{env: "SECKILL_PEERS", flag: "peers", def: "", usage: "base URLs of the replicas a stampede spreads its buyers over, comma-separated (empty: this replica only)", set: peers(&c.Stampede.Peers)},
		{env: "SECKILL_STAMPEDE_MAX_BUYERS", flag: "stampede-max-buyers", def: "5000", usage: "most simulated buyers in one stampede", set: integer(&c.Stampede.MaxBuyers)},
		{env: "SECKILL_API", flag: "api", def: "true", usage: "serve the HTTP API (serve only; the worker never does)", set: boolean(&c.Run.API)},
		{env: "SECKILL_RELAY", flag: "relay", def: "true", usage: "run the outbox relay", set: boolean(&c.Run.Relay)},
		{env: "SECKILL_PERSISTER", flag: "persister", def: "true", usage: "run the redis-lua persister (Redis Streams → MySQL)", set: boolean(&c.Run.Persister)},
		{env: "SECKILL_EXPIRER", flag: "expirer", def: "true", usage: "run the expirer (unpaid orders expire, their units go back on sale)", set: boolean(&c.Run.Expirer)},
		{env: "SECKILL_RECONCILE_EVERY", flag: "reconcile-every", def: "30s", usage: "how often the reconciliation checks the audit's invariants on the live sales, at most 32 a run, in turn (0: not in this process)", set: dur(&c.Reconcile.Every)},
		{env: "SECKILL_PAYMENT_WINDOW", flag: "payment-window", def: "10m", usage: "how long an order waits for payment before it expires and its units go back on sale", set: dur(&c.Payment.Window)},
		{env: "SECKILL_PAYMENT_LATENCY", flag: "payment-latency", def: "50ms", usage: "the simulated payment provider's mean time per charge (0: instant)", set: dur(&c.Payment.Latency)},
		{env: "SECKILL_PAYMENT_FAILURE_RATE", flag: "payment-failure-rate", def: "0.05", usage: "the share of charges the simulated payment provider declines, 0 to 1", set: float(&c.Payment.FailureRate)},
		{env: "SECKILL_EXPIRE_EVERY", flag: "expire-every", def: "1s", usage: "how often the expirer looks for unpaid orders past their window and closed orders to return", set: dur(&c.Payment.ExpireEvery)},
		{env: "SECKILL_REDISLUA_MIN_REPLICAS", flag: "redislua-min-replicas", def: "0", usage: "redis-lua: replicas of the sale's Redis master that must acknowledge a batch (WAIT) before its purchases are answered 202; fewer in time answers 503 unconfirmed, which a retry with the same Idempotency-Key resolves (0: answer once the script ran on the master, as on one node)", set: integer(&c.RedisLua.MinReplicas)},
		{env: "SECKILL_REDISLUA_WAIT_TIMEOUT", flag: "redislua-wait-timeout", def: "100ms", usage: "redis-lua with SECKILL_REDISLUA_MIN_REPLICAS: how long a batch waits for the replicas (1ms to 5s)", set: dur(&c.RedisLua.WaitTimeout)},
		{env: "SECKILL_PERSIST_EVERY", flag: "persist-every", def: "1s", usage: "how often the persister sweeps every redis-lua product's stream", set: dur(&c.Persist.Every)},
		{env: "SECKILL_PERSIST_LINGER", flag: "persist-linger", def: "20ms", usage: "how long a woken persister lets purchases gather before it writes them to MySQL in one transaction", set: dur(&c.Persist.Linger)},
		{env: "SECKILL_PERSIST_BURST", flag: "persist-burst", def: "1000", usage: "purchases a second, accepted by this process, above which its persister holds off until the burst is over (peak shaving; 0 or negative: never)", set: float(&c.Persist.Burst)},
		{env: "SECKILL_PERSIST_MAX_LAG", flag: "persist-max-lag", def: "10s", usage: "the longest a persister holds off during a burst", set: dur(&c.Persist.MaxLag)},
		{env: "SECKILL_PERSIST_CLAIM_AFTER", flag: "persist-claim-after", def: "5s", usage: "how long a persister's unacknowledged entries wait before another persister takes them over", set: dur(&c.Persist.ClaimAfter)},
		{env: "SECKILL_CONSUMER", flag: "consumer", def: "true", usage: "run the order consumer", set: boolean(&c.Run.Consumer)},
		{env: "SECKILL_INSTANCE_ID", flag: "instance-id", def: fmt.Sprintf("%s-%d", host, os.Getpid()), usage: "name of this process in logs and outbox claims", set: str(&c.InstanceID)},
		{env: "SECKILL_AUTO_MIGRATE", flag: "auto-migrate", def: "false", usage: "apply pending migrations at start (dev)", set: boolean(&c.AutoMigrate)},
		{env: "SECKILL_TRACING", flag: "tracing", def: "off", usage: "OpenTelemetry tracing: off, or otlp (OTLP/HTTP to OTEL_EXPORTER_OTLP_ENDPOINT)", set: str(&c.Tracing.Exporter)},
		{env: "SECKILL_TRACING_SAMPLE", flag: "tracing-sample", def: "0.01", usage: "with SECKILL_TRACING: the fraction of the requests that start a trace (0 to 1); a request with a sampled traceparent is traced whatever it says", set: float(&c.Tracing.Sample)},
		{env: "OTEL_EXPORTER_OTLP_ENDPOINT", flag: "otlp-endpoint", def: "http://127.0.0.1:4318", usage: "with SECKILL_TRACING=otlp: the collector's OTLP/HTTP base URL (the standard OpenTelemetry variable)", set: str(&c.Tracing.Endpoint)},
		{env: "SECKILL_LOG_LEVEL", flag: "log-level", def: "info", usage: "debug, info, warn or error", set: level(&c.LogLevel)},
	}
}

// Load reads the settings from getenv, then from args (flags win), and validates them. stderr
// receives the flag package's usage text on -h.
func Load(name string, args []string, getenv func(string) string, stderr io.Writer) (*Config, error) {
	c := &Config{}
	c.settings = c.table()
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	for _, s := range c.settings {
		s.value = s.def
		if v := getenv(s.env); v != "" {
			s.value = v
		}
		fs.Func(s.flag, fmt.Sprintf("%s (env %s)", s.usage, s.env), func(v string) error {
			s.value = v
			return nil
		})
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	var errs []error
	for _, s := range c.settings {
		if err := s.set(s.value); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %w", s.env, maskIf(s, s.value), err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return c, c.validate()
}

func (c *Config) validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if _, _, err := net.SplitHostPort(c.HTTP.Addr); err != nil {
		add("SECKILL_HTTP_ADDR: %v", err)
	}
	if c.HTTP.PprofAddr != "" {
		if _, _, err := net.SplitHostPort(c.HTTP.PprofAddr); err != nil {
			add("SECKILL_PPROF_ADDR: %v", err)
		}
	}
	switch c.Tracing.Exporter {
	case "off", "otlp":
	default:
		add("SECKILL_TRACING must be off or otlp")
	}
	if c.Tracing.Sample < 0 || c.Tracing.Sample > 1 {
		add("SECKILL_TRACING_SAMPLE must be between 0 and 1")
	}
	if u, err := url.Parse(c.Tracing.Endpoint); c.Tracing.Exporter == "otlp" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
		add("OTEL_EXPORTER_OTLP_ENDPOINT must be an http or https URL such as http://127.0.0.1:4318")
	}
	if c.HTTP.PlantedSlowdown < 0 || c.HTTP.PlantedSlowdown > 1 {
		add("SECKILL_PLANTED_SLOWDOWN must be between 0 and 1")
	}
	if c.Sale.BatchMax < 1 || c.Sale.BatchMax > MaxBatch {
		add("SECKILL_BATCH_MAX must be between 1 and %d", MaxBatch)
	}
	if c.Sale.BatchInflight < 1 || c.Sale.BatchInflight > 16 {
		add("SECKILL_BATCH_INFLIGHT must be between 1 and 16")
	}
	if c.Sale.BatchLinger < 0 || c.Sale.BatchLinger > time.Second {
		add("SECKILL_BATCH_LINGER must be between 0 and 1s")
	}
	if c.RedisLua.MinReplicas < 0 || c.RedisLua.MinReplicas > MaxRedisLuaReplicas {
		add("SECKILL_REDISLUA_MIN_REPLICAS must be between 0 and %d", MaxRedisLuaReplicas)
	}
	// WAIT takes whole milliseconds, and its 0 means forever.
	if c.RedisLua.WaitTimeout < time.Millisecond || c.RedisLua.WaitTimeout > 5*time.Second {
		add("SECKILL_REDISLUA_WAIT_TIMEOUT must be between 1ms and 5s")
	}
	// A room lets a second's worth of its rate in at once at most: a tick over a second admits
	// below the rate.
	if c.Waitroom.Tick < 10*time.Millisecond || c.Waitroom.Tick > time.Second {
		add("SECKILL_WAITROOM_TICK must be between 10ms and 1s")
	}
	if err := c.validateChallenge(); err != nil {
		add("%v", err)
	}
	if len(c.AdminToken) < 8 {
		add("SECKILL_ADMIN_TOKEN is required and must have at least 8 characters (`make up` sets a dev value)")
	}
	if cfg, err := mysql.ParseDSN(c.MySQL.DSN); err != nil {
		add("SECKILL_MYSQL_DSN: %v", err)
	} else if cfg.DBName == "" {
		add("SECKILL_MYSQL_DSN names no database (…/seckill)")
	}
	if !c.Sale.DefaultStrategy.Safe() && !c.Sale.AllowUnsafe {
		add("SECKILL_DEFAULT_STRATEGY=%s needs SECKILL_ALLOW_UNSAFE_STRATEGIES=true: it is unsafe", c.Sale.DefaultStrategy)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"SECKILL_SHUTDOWN_TIMEOUT", c.HTTP.ShutdownTimeout}, {"SECKILL_SALE_REFRESH", c.Sale.Refresh}, {"SECKILL_LIVE_REDIS_TIMEOUT", c.Live.RedisTimeout}, {"SECKILL_ZK_SESSION_TIMEOUT", c.ZK.SessionTimeout}, {"SECKILL_LOCK_WAIT", c.Sale.LockWait}, {"SECKILL_LOCK_TTL", c.Sale.LockTTL}, {"SECKILL_PERSIST_EVERY", c.Persist.Every}, {"SECKILL_PERSIST_CLAIM_AFTER", c.Persist.ClaimAfter}, {"SECKILL_PERSIST_LINGER", c.Persist.Linger}, {"SECKILL_PERSIST_MAX_LAG", c.Persist.MaxLag}, {"SECKILL_PAYMENT_WINDOW", c.Payment.Window}, {"SECKILL_EXPIRE_EVERY", c.Payment.ExpireEvery}, {"SECKILL_BOARD_REFRESH", c.Read.Refresh}, {"SECKILL_STREAM_HEARTBEAT", c.Read.Heartbeat}, {"SECKILL_STREAM_MIN_GAP", c.Read.StreamMinGap}} {
		if d.v <= 0 {
			add("%s must be positive", d.name)
		}
	}
	if c.Reconcile.Every < 0 {
		add("SECKILL_RECONCILE_EVERY must not be negative (0 turns it off)")
	}
	if c.MySQL.MaxOpenConns < 1 || c.Kafka.Partitions < 1 || c.Live.RedisPool < 1 {
		add("SECKILL_MYSQL_MAX_OPEN_CONNS, SECKILL_KAFKA_PARTITIONS and SECKILL_LIVE_REDIS_POOL must be at least 1")
	}
	if c.Limits.PerUserRate < 0 || c.Limits.PerUserBurst < 0 || c.Limits.PerClientRate < 0 || c.Limits.PerClientBurst < 0 || c.Limits.MaxInflight < 0 {
		add("SECKILL_RATE_PER_USER, SECKILL_RATE_BURST, SECKILL_RATE_PER_CLIENT, SECKILL_RATE_CLIENT_BURST and SECKILL_MAX_INFLIGHT must not be negative")
	}
	if c.Read.PerClientRate < 0 || c.Read.PerClientBurst < 0 || c.Read.StreamsMax < 1 || c.Read.StreamsPerClient < 1 {
		add("SECKILL_READ_RATE and SECKILL_READ_BURST must not be negative, SECKILL_STREAMS_MAX and SECKILL_STREAMS_PER_CLIENT must be at least 1")
	}
	if c.Payment.Latency < 0 || !(c.Payment.FailureRate >= 0 && c.Payment.FailureRate <= 1) {
		add("SECKILL_PAYMENT_LATENCY must not be negative and SECKILL_PAYMENT_FAILURE_RATE must be between 0 and 1")
	}
	if err := c.loadBuyerTokens(); err != nil {
		add("%v", err)
	}
	if c.Stampede.MaxBuyers < 1 || c.Stampede.MaxBuyers > MaxStampedeBuyers {
		add("SECKILL_STAMPEDE_MAX_BUYERS must be between 1 and %d", MaxStampedeBuyers)
	}
	if err := c.redisTopology(); err != nil {
		add("SECKILL_REDIS_*: %v", err)
	}
	if len(c.ZK.Servers) == 0 || len(c.Kafka.Brokers) == 0 || c.Redis.Addr == "" || c.Kafka.Topic == "" || c.Kafka.GroupID == "" {
		add("Redis, ZooKeeper and Kafka addresses, the topic and the group must not be empty")
	}
	if len(c.ZooLocks.RedlockAddrs) == 0 || c.ZooLocks.MemcachedAddr == "" {
		add("SECKILL_REDLOCK_ADDRS and SECKILL_MEMCACHED_ADDR must not be empty")
	}
	return errors.Join(errs...)
}

// The kinds of SECKILL_BOT_CHALLENGE.
const (
	ChallengeOff       = "off"
	ChallengeAltcha    = "altcha"
	ChallengeTurnstile = "turnstile"
)

// TurnstileURL is Cloudflare's siteverify endpoint, SECKILL_TURNSTILE_URL's default.
const TurnstileURL = "https://challenges.cloudflare.com/turnstile/v0/siteverify"

// validateChallenge checks the SECKILL_BOT_CHALLENGE settings of the kind chosen (the others are
// ignored).
func (c *Config) validateChallenge() error {
	ch := &c.Challenge
	switch ch.Kind {
	case ChallengeOff:
		return nil
	case ChallengeAltcha:
		switch {
		case ch.AltchaKey != "" && len(ch.AltchaKey) < 32:
			return errors.New("SECKILL_ALTCHA_KEY must have at least 32 bytes (make one: head -c 32 /dev/urandom | base64)")
		case ch.AltchaMaxNumber < 1000 || ch.AltchaMaxNumber > 10_000_000:
			return errors.New("SECKILL_ALTCHA_MAX_NUMBER must be between 1000 and 10000000")
		case ch.AltchaExpires < 10*time.Second || ch.AltchaExpires > time.Hour:
			return errors.New("SECKILL_ALTCHA_EXPIRES must be between 10s and 1h")
		}
		return nil
	case ChallengeTurnstile:
		if ch.TurnstileSecret == "" {
			return errors.New("SECKILL_BOT_CHALLENGE=turnstile needs SECKILL_TURNSTILE_SECRET")
		}
		if u, err := url.Parse(ch.TurnstileURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return fmt.Errorf("SECKILL_TURNSTILE_URL %q is not an http(s) URL", ch.TurnstileURL)
		}
		return nil
	}
	return fmt.Errorf("SECKILL_BOT_CHALLENGE must be %s, %s or %s", ChallengeOff, ChallengeAltcha, ChallengeTurnstile)
}

// BuyerTokens reads the SECKILL_BUYER_JWT_* settings only, for a command that needs no other
// (`seckill token`).
func BuyerTokens(getenv func(string) string) (buyer.Config, error) {
	c, err := loadOnly(getenv, "SECKILL_BUYER_JWT_")
	if err != nil {
		return buyer.Config{}, err
	}
	err = c.loadBuyerTokens()
	return c.Buyer.Tokens, err
}

// RedisTopology reads the SECKILL_REDIS_* settings only, with the app's defaults: for the tools
// that reach the app's Redis beside it (the load test, the bench).
func RedisTopology(getenv func(string) string) (redisconn.Topology, error) {
	c, err := loadOnly(getenv, "SECKILL_REDIS_")
	if err != nil {
		return redisconn.Topology{}, err
	}
	err = c.redisTopology()
	return c.Redis.Topology, err
}

// loadOnly is a Config of the settings whose variable starts with prefix, from getenv or their
// defaults; the rest stays zero.
func loadOnly(getenv func(string) string, prefix string) (*Config, error) {
	c := &Config{}
	var errs []error
	for _, s := range c.table() {
		if !strings.HasPrefix(s.env, prefix) {
			continue
		}
		s.value = s.def
		if v := getenv(s.env); v != "" {
			s.value = v
		}
		if err := s.set(s.value); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %w", s.env, maskIf(s, s.value), err))
		}
	}
	return c, errors.Join(errs...)
}

// loadBuyerTokens fills Buyer.Tokens from the SECKILL_BUYER_JWT_* settings and checks that they
// make a verifier.
func (c *Config) loadBuyerTokens() error {
	b := &c.Buyer
	b.Tokens = buyer.Config{HMACKey: []byte(b.JWTHMACKey), Issuer: b.JWTIssuer, Audience: b.JWTAudience, Leeway: b.JWTLeeway, MaxTTL: b.JWTMaxTTL}
	if b.JWTPublicKeyFile != "" {
		pem, err := os.ReadFile(b.JWTPublicKeyFile)
		if err != nil {
			return fmt.Errorf("SECKILL_BUYER_JWT_PUBLIC_KEY_FILE: %w", err)
		}
		b.Tokens.PublicKeyPEM = pem
	}
	if b.JWTLeeway < 0 {
		return errors.New("SECKILL_BUYER_JWT_LEEWAY must not be negative")
	}
	if b.JWTMaxTTL <= 0 {
		return errors.New("SECKILL_BUYER_JWT_MAX_TTL must be positive")
	}
	if !b.Tokens.Enabled() {
		if b.JWTIssuer != "" || b.JWTAudience != "" {
			return errors.New("SECKILL_BUYER_JWT_ISSUER and _AUDIENCE need SECKILL_BUYER_JWT_HMAC_KEY or _PUBLIC_KEY_FILE")
		}
		return nil
	}
	if _, err := buyer.NewVerifier(b.Tokens); err != nil {
		return fmt.Errorf("SECKILL_BUYER_JWT_*: %w", err)
	}
	return nil
}

// LogValue renders every setting for the start-up log, secrets masked.
func (c *Config) LogValue() slog.Value {
	attrs := make([]slog.Attr, 0, len(c.settings))
	for _, s := range c.settings {
		attrs = append(attrs, slog.String(s.env, maskIf(s, s.value)))
	}
	return slog.GroupValue(attrs...)
}

func maskIf(s *setting, v string) string {
	if !s.secret || v == "" {
		return v
	}
	if s.env == "SECKILL_MYSQL_DSN" {
		return MaskDSN(v)
	}
	return "*****"
}

// MaskDSN returns a MySQL DSN with its password hidden.
func MaskDSN(dsn string) string {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "(unparsable DSN)"
	}
	if cfg.Passwd != "" {
		cfg.Passwd = "*****"
	}
	return cfg.FormatDSN()
}

// redisTopology makes Redis.Topology from the settings and checks it.
func (c *Config) redisTopology() error {
	mode, err := redisconn.ParseMode(c.Redis.Mode)
	if err != nil {
		return err
	}
	addrs := c.Redis.Addrs
	if len(addrs) == 0 {
		addrs = []string{c.Redis.Addr}
	}
	c.Redis.Topology = redisconn.Topology{Mode: mode, Addrs: addrs, Master: c.Redis.Master, Password: c.Redis.Password}
	return c.Redis.Topology.Validate()
}

// ed25519Seed reads an Ed25519 seed in base64 ("" is none).
func ed25519Seed(dst *[]byte) func(string) error {
	return func(v string) error {
		v = strings.TrimRight(strings.TrimSpace(v), "=")
		if v == "" {
			*dst = nil
			return nil
		}
		b, err := base64.RawStdEncoding.DecodeString(v)
		if err != nil {
			if b, err = base64.RawURLEncoding.DecodeString(v); err != nil {
				return errors.New("not base64")
			}
		}
		if len(b) != ed25519.SeedSize {
			return fmt.Errorf("an Ed25519 key is a %d-byte seed, this is %d bytes (make one: head -c %d /dev/urandom | base64)", ed25519.SeedSize, len(b), ed25519.SeedSize)
		}
		*dst = b
		return nil
	}
}

func str(dst *string) func(string) error {
	return func(v string) error { *dst = strings.TrimSpace(v); return nil }
}

func list(dst *[]string) func(string) error {
	return func(v string) error {
		*dst = nil
		for _, part := range strings.Split(v, ",") {
			if part = strings.TrimSpace(part); part != "" {
				*dst = append(*dst, part)
			}
		}
		return nil
	}
}

// MaxBatch bounds SECKILL_BATCH_MAX: one batch is one multi-row INSERT, and its statement must
// stay far below max_allowed_packet.
const MaxBatch = 1000

// MaxRedisLuaReplicas bounds SECKILL_REDISLUA_MIN_REPLICAS: more replicas than any Redis
// topology here runs is a typo, and would answer every purchase 503.
const MaxRedisLuaReplicas = 16

// MaxStampedeBuyers bounds SECKILL_STAMPEDE_MAX_BUYERS: a stampede is a demo, not a load test.
const MaxStampedeBuyers = 1_000_000

// DatabaseName returns the database named by the MySQL DSN ("" if the DSN does not parse, which
// validation has refused already).
func (c *Config) DatabaseName() string {
	cfg, err := mysql.ParseDSN(c.MySQL.DSN)
	if err != nil {
		return ""
	}
	return cfg.DBName
}

// peers parses a comma-separated list of base URLs: http or https, a host, no path beyond "/",
// no query, fragment or credentials. The trailing slash is dropped.
func peers(dst *[]string) func(string) error {
	return func(v string) error {
		var raw []string
		if err := list(&raw)(v); err != nil {
			return err
		}
		*dst = nil
		for _, p := range raw {
			u, err := url.Parse(p)
			switch {
			case err != nil:
				return fmt.Errorf("%q is not a URL: %w", p, err)
			case u.Scheme != "http" && u.Scheme != "https":
				return fmt.Errorf("%q: want a base URL such as http://127.0.0.1:8081", p)
			case u.Host == "" || u.Hostname() == "":
				return fmt.Errorf("%q has no host", p)
			case u.User != nil || u.RawQuery != "" || u.Fragment != "" || (u.Path != "" && u.Path != "/"):
				return fmt.Errorf("%q: want scheme://host:port only, with no path, query or credentials", p)
			}
			*dst = append(*dst, u.Scheme+"://"+u.Host)
		}
		return nil
	}
}

// prefixes parses a comma-separated list of addresses and CIDRs; "none" is the empty list (an
// empty value takes the default).
func prefixes(dst *[]netip.Prefix) func(string) error {
	return func(v string) error {
		var raw []string
		if err := list(&raw)(v); err != nil {
			return err
		}
		*dst = nil
		if len(raw) == 1 && strings.EqualFold(raw[0], "none") {
			return nil
		}
		for _, p := range raw {
			if a, err := netip.ParseAddr(p); err == nil {
				*dst = append(*dst, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
				continue
			}
			pf, err := netip.ParsePrefix(p)
			if err != nil {
				return fmt.Errorf("%q is neither an address nor a CIDR", p)
			}
			*dst = append(*dst, pf.Masked())
		}
		return nil
	}
}

func integer(dst *int) func(string) error {
	return func(v string) (err error) { *dst, err = strconv.Atoi(strings.TrimSpace(v)); return err }
}

func float(dst *float64) func(string) error {
	return func(v string) (err error) { *dst, err = strconv.ParseFloat(strings.TrimSpace(v), 64); return err }
}

func boolean(dst *bool) func(string) error {
	return func(v string) (err error) { *dst, err = strconv.ParseBool(strings.TrimSpace(v)); return err }
}

func dur(dst *time.Duration) func(string) error {
	return func(v string) (err error) { *dst, err = time.ParseDuration(strings.TrimSpace(v)); return err }
}

func strategy(dst *sale.Strategy) func(string) error {
	return func(v string) (err error) { *dst, err = sale.ParseStrategy(strings.TrimSpace(v)); return err }
}

func level(dst *slog.Level) func(string) error {
	return func(v string) error { return dst.UnmarshalText([]byte(strings.TrimSpace(v))) }
}
