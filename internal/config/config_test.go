package config

import (
	"bytes"
	"encoding/base64"
	"io"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/seckill-go/seckill-go/internal/redisconn"
	"github.com/seckill-go/seckill-go/internal/sale"
)

func env(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

func TestDefaults(t *testing.T) {
	c, err := Load("test", nil, env(map[string]string{"SECKILL_ADMIN_TOKEN": "12345678"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	got := []any{c.HTTP.Addr, c.Kafka.Topic, c.Sale.DefaultStrategy, c.Sale.AllowUnsafe, c.Run.API, c.Run.Relay, c.Run.Consumer, c.ZK.Servers, c.RedisLua.MinReplicas, c.RedisLua.WaitTimeout}
	want := []any{":8080", "seckill.orders", sale.StrategyMySQL, false, true, true, true, []string{"127.0.0.1:2181"}, 0, 100 * time.Millisecond}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("defaults (-want +got):\n%s", diff)
	}
}

func TestFlagsOverrideEnv(t *testing.T) {
	c, err := Load("test", []string{"-http-addr", "127.0.0.1:9000", "-kafka-brokers", "a:1, b:2"}, env(map[string]string{
		"SECKILL_ADMIN_TOKEN": "12345678", "SECKILL_HTTP_ADDR": "127.0.0.1:7000", "SECKILL_LOCK_WAIT": "250ms",
	}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTP.Addr != "127.0.0.1:9000" || c.Sale.LockWait != 250*time.Millisecond {
		t.Fatalf("addr %q, lock wait %s", c.HTTP.Addr, c.Sale.LockWait)
	}
	if diff := cmp.Diff([]string{"a:1", "b:2"}, c.Kafka.Brokers); diff != "" {
		t.Fatalf("brokers (-want +got):\n%s", diff)
	}
}

func TestInvalid(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"no admin token", map[string]string{}, "SECKILL_ADMIN_TOKEN"},
		{"short admin token", map[string]string{"SECKILL_ADMIN_TOKEN": "short"}, "SECKILL_ADMIN_TOKEN"},
		{"unknown strategy", map[string]string{"SECKILL_DEFAULT_STRATEGY": "magic"}, "SECKILL_DEFAULT_STRATEGY"},
		{"none without unsafe", map[string]string{"SECKILL_DEFAULT_STRATEGY": "none"}, "SECKILL_ALLOW_UNSAFE_STRATEGIES"},
		{"bad duration", map[string]string{"SECKILL_LOCK_WAIT": "soon"}, "SECKILL_LOCK_WAIT"},
		{"bad bool", map[string]string{"SECKILL_RELAY": "maybe"}, "SECKILL_RELAY"},
		{"DSN without database", map[string]string{"SECKILL_MYSQL_DSN": "root@tcp(127.0.0.1:3306)/"}, "names no database"},
		{"bad address", map[string]string{"SECKILL_HTTP_ADDR": "8080"}, "SECKILL_HTTP_ADDR"},
		{"peer without scheme", map[string]string{"SECKILL_PEERS": "127.0.0.1:8081"}, "SECKILL_PEERS"},
		{"peer with path", map[string]string{"SECKILL_PEERS": "http://a:1/api"}, "SECKILL_PEERS"},
		{"peer with credentials", map[string]string{"SECKILL_PEERS": "http://u:p@a:1"}, "SECKILL_PEERS"},
		{"peer ftp", map[string]string{"SECKILL_PEERS": "ftp://a:1"}, "SECKILL_PEERS"},
		{"peer without host", map[string]string{"SECKILL_PEERS": "http://:8081"}, "SECKILL_PEERS"},
		{"no stampede buyers", map[string]string{"SECKILL_STAMPEDE_MAX_BUYERS": "0"}, "SECKILL_STAMPEDE_MAX_BUYERS"},
		{"too many stampede buyers", map[string]string{"SECKILL_STAMPEDE_MAX_BUYERS": "1000001"}, "SECKILL_STAMPEDE_MAX_BUYERS"},
		{"stampede buyers not a number", map[string]string{"SECKILL_STAMPEDE_MAX_BUYERS": "many"}, "SECKILL_STAMPEDE_MAX_BUYERS"},
		{"short buyer key", map[string]string{"SECKILL_BUYER_JWT_HMAC_KEY": "short"}, "SECKILL_BUYER_JWT_"},
		{"buyer issuer without a key", map[string]string{"SECKILL_BUYER_JWT_ISSUER": "shop"}, "SECKILL_BUYER_JWT_ISSUER"},
		{"buyer token lifetime zero", map[string]string{"SECKILL_BUYER_JWT_MAX_TTL": "0s"}, "SECKILL_BUYER_JWT_MAX_TTL"},
		{"buyer token lifetime negative", map[string]string{"SECKILL_BUYER_JWT_MAX_TTL": "-1h"}, "SECKILL_BUYER_JWT_MAX_TTL"},
		{"buyer public key missing", map[string]string{"SECKILL_BUYER_JWT_PUBLIC_KEY_FILE": "/nonexistent.pem"}, "SECKILL_BUYER_JWT_PUBLIC_KEY_FILE"},
		{"unknown Redis mode", map[string]string{"SECKILL_REDIS_MODE": "ring"}, "SECKILL_REDIS_"},
		{"negative redis-lua replicas", map[string]string{"SECKILL_REDISLUA_MIN_REPLICAS": "-1"}, "SECKILL_REDISLUA_MIN_REPLICAS"},
		{"too many redis-lua replicas", map[string]string{"SECKILL_REDISLUA_MIN_REPLICAS": "17"}, "SECKILL_REDISLUA_MIN_REPLICAS"},
		{"redis-lua replicas not a number", map[string]string{"SECKILL_REDISLUA_MIN_REPLICAS": "one"}, "SECKILL_REDISLUA_MIN_REPLICAS"},
		// WAIT's 0 is forever: a sub-millisecond wait must not round to it.
		{"redis-lua wait under a millisecond", map[string]string{"SECKILL_REDISLUA_WAIT_TIMEOUT": "500us"}, "SECKILL_REDISLUA_WAIT_TIMEOUT"},
		{"redis-lua wait too long", map[string]string{"SECKILL_REDISLUA_WAIT_TIMEOUT": "6s"}, "SECKILL_REDISLUA_WAIT_TIMEOUT"},
		{"single Redis with two addresses", map[string]string{"SECKILL_REDIS_ADDRS": "a:1,b:2"}, "SECKILL_REDIS_"},
		{"both buyer keys", map[string]string{"SECKILL_BUYER_JWT_HMAC_KEY": strings.Repeat("k", 32), "SECKILL_BUYER_JWT_PUBLIC_KEY_FILE": "/etc/os-release"}, "SECKILL_BUYER_JWT_"},
		{"waiting room tick too short", map[string]string{"SECKILL_WAITROOM_TICK": "1ms"}, "SECKILL_WAITROOM_TICK"},
		{"waiting room tick too long", map[string]string{"SECKILL_WAITROOM_TICK": "2s"}, "SECKILL_WAITROOM_TICK"},
		{"waiting room key not base64", map[string]string{"SECKILL_WAITROOM_KEY": "not base64!"}, "SECKILL_WAITROOM_KEY"},
		{"waiting room key too short", map[string]string{"SECKILL_WAITROOM_KEY": base64.StdEncoding.EncodeToString(make([]byte, 31))}, "SECKILL_WAITROOM_KEY"},
		{"waiting room key too long", map[string]string{"SECKILL_WAITROOM_KEY": base64.StdEncoding.EncodeToString(make([]byte, 64))}, "32-byte seed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, ok := tc.env["SECKILL_ADMIN_TOKEN"]; !ok && tc.name != "no admin token" {
				tc.env["SECKILL_ADMIN_TOKEN"] = "12345678"
			}
			_, err := Load("test", nil, env(tc.env), io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load() error = %v, want one mentioning %s", err, tc.want)
			}
		})
	}
}

// TestRedisTopology: the Redis settings make one topology; an empty SECKILL_REDIS_ADDRS falls back
// to SECKILL_REDIS_ADDR, and a cluster of one seed is still a cluster.
func TestRedisTopology(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want redisconn.Topology
	}{
		{"default", nil, redisconn.Topology{Mode: redisconn.Single, Addrs: []string{"127.0.0.1:6379"}, Master: "seckill"}},
		{"cluster", map[string]string{"SECKILL_REDIS_MODE": "cluster", "SECKILL_REDIS_ADDRS": "a:7001, b:7002"},
			redisconn.Topology{Mode: redisconn.Cluster, Addrs: []string{"a:7001", "b:7002"}, Master: "seckill"}},
		{"cluster of one seed", map[string]string{"SECKILL_REDIS_MODE": "Cluster", "SECKILL_REDIS_ADDR": "a:7001"},
			redisconn.Topology{Mode: redisconn.Cluster, Addrs: []string{"a:7001"}, Master: "seckill"}},
		{"sentinel", map[string]string{"SECKILL_REDIS_MODE": "sentinel", "SECKILL_REDIS_ADDRS": "s:1,s:2,s:3", "SECKILL_REDIS_MASTER": "shop", "SECKILL_REDIS_PASSWORD": "pw"},
			redisconn.Topology{Mode: redisconn.Sentinel, Addrs: []string{"s:1", "s:2", "s:3"}, Master: "shop", Password: "pw"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := map[string]string{"SECKILL_ADMIN_TOKEN": "12345678"}
			for k, v := range tc.env {
				e[k] = v
			}
			c, err := Load("test", nil, env(e), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, c.Redis.Topology); diff != "" {
				t.Errorf("topology (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStampedeSettings(t *testing.T) {
	for _, tc := range []struct {
		name      string
		env       map[string]string
		wantPeers []string
		wantMax   int
	}{
		{"defaults", map[string]string{}, nil, 5000},
		{"peers normalised", map[string]string{
			"SECKILL_PEERS":               " http://127.0.0.1:8081/, https://app-2:8080 ,,http://[::1]:8083",
			"SECKILL_STAMPEDE_MAX_BUYERS": "200",
		}, []string{"http://127.0.0.1:8081", "https://app-2:8080", "http://[::1]:8083"}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.env["SECKILL_ADMIN_TOKEN"] = "12345678"
			c, err := Load("test", nil, env(tc.env), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantPeers, c.Stampede.Peers); diff != "" {
				t.Errorf("peers (-want +got):\n%s", diff)
			}
			if c.Stampede.MaxBuyers != tc.wantMax {
				t.Errorf("max buyers = %d, want %d", c.Stampede.MaxBuyers, tc.wantMax)
			}
		})
	}
}

func TestDatabaseName(t *testing.T) {
	c, err := Load("test", nil, env(map[string]string{
		"SECKILL_ADMIN_TOKEN": "12345678", "SECKILL_MYSQL_DSN": "app:pw@tcp(db:3306)/shop_1?parseTime=true",
	}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.DatabaseName(); got != "shop_1" {
		t.Fatalf("DatabaseName() = %q, want shop_1", got)
	}
}

func TestBuyerTokens(t *testing.T) {
	c, err := Load("test", nil, env(map[string]string{"SECKILL_ADMIN_TOKEN": "12345678"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Buyer.Tokens.Enabled() {
		t.Fatal("buyer tokens enabled by default")
	}
	c, err = Load("test", nil, env(map[string]string{
		"SECKILL_ADMIN_TOKEN":        "12345678",
		"SECKILL_BUYER_JWT_HMAC_KEY": strings.Repeat("k", 32),
		"SECKILL_BUYER_JWT_AUDIENCE": "seckill",
	}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Buyer.Tokens.Enabled() || c.Buyer.Tokens.Audience != "seckill" || c.Buyer.Tokens.Leeway != 30*time.Second || c.Buyer.Tokens.MaxTTL != 24*time.Hour {
		t.Fatalf("Tokens = %+v", c.Buyer.Tokens)
	}
	tokens, err := BuyerTokens(env(map[string]string{"SECKILL_BUYER_JWT_HMAC_KEY": strings.Repeat("k", 32), "SECKILL_BUYER_JWT_MAX_TTL": "2h"}))
	if err != nil || tokens.MaxTTL != 2*time.Hour {
		t.Fatalf("BuyerTokens with SECKILL_BUYER_JWT_MAX_TTL=2h: %+v, %v", tokens, err)
	}
}

func TestLogValueMasksSecrets(t *testing.T) {
	c, err := Load("test", nil, env(map[string]string{
		"SECKILL_ADMIN_TOKEN":        "super-secret-token",
		"SECKILL_MYSQL_DSN":          "app:hunter2@tcp(db:3306)/seckill",
		"SECKILL_REDIS_PASSWORD":     "redis-secret",
		"SECKILL_BUYER_JWT_HMAC_KEY": "buyer-secret-buyer-secret-buyer-secret",
	}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	slog.New(slog.NewTextHandler(&sb, nil)).Info("start", "config", c)
	out := sb.String()
	for _, secret := range []string{"super-secret-token", "hunter2", "redis-secret", "buyer-secret"} {
		if strings.Contains(out, secret) {
			t.Errorf("log line shows %q: %s", secret, out)
		}
	}
	if !strings.Contains(out, "app:*****@tcp(db:3306)/seckill") {
		t.Errorf("log line lacks the masked DSN: %s", out)
	}
}

// TestWaitroomKey: the passes' key is a 32-byte seed in base64, either alphabet, padded or not;
// unset is none (the process draws its own); a refusal and the start-up log never show it.
func TestWaitroomKey(t *testing.T) {
	seed := make([]byte, 32)
	for i := range seed {
		seed[i] = byte(250 - i) // bytes that differ between the two alphabets
	}
	for _, spelled := range []string{
		base64.StdEncoding.EncodeToString(seed), base64.RawStdEncoding.EncodeToString(seed),
		base64.URLEncoding.EncodeToString(seed), " " + base64.RawURLEncoding.EncodeToString(seed) + "\n",
	} {
		c, err := Load("test", nil, env(map[string]string{"SECKILL_ADMIN_TOKEN": "12345678", "SECKILL_WAITROOM_KEY": spelled}), io.Discard)
		if err != nil {
			t.Fatalf("key %q: %v", spelled, err)
		}
		if !bytes.Equal(c.Waitroom.Key, seed) {
			t.Errorf("key %q read as %x", spelled, c.Waitroom.Key)
		}
		var sb strings.Builder
		slog.New(slog.NewTextHandler(&sb, nil)).Info("start", "config", c)
		if strings.Contains(sb.String(), strings.TrimSpace(spelled)) {
			t.Errorf("the start-up log shows the key: %s", sb.String())
		}
	}
	c, err := Load("test", nil, env(map[string]string{"SECKILL_ADMIN_TOKEN": "12345678"}), io.Discard)
	if err != nil || c.Waitroom.Key != nil {
		t.Errorf("no key: %x, %v; want none", c.Waitroom.Key, err)
	}
	bad := base64.StdEncoding.EncodeToString(make([]byte, 31))
	if _, err := Load("test", nil, env(map[string]string{"SECKILL_ADMIN_TOKEN": "12345678", "SECKILL_WAITROOM_KEY": bad}), io.Discard); err == nil || strings.Contains(err.Error(), bad) {
		t.Errorf("a short key: %v; want a refusal that does not show it", err)
	}
}

// TestAddressLists: SECKILL_TRUSTED_PROXIES and SECKILL_RATE_EXEMPT take addresses and CIDRs
// (an address is its own /32 or /128, an IPv4-mapped one its IPv4 form, a CIDR masked); none is
// the empty list; anything else is refused at start.
func TestAddressLists(t *testing.T) {
	c, err := Load("test", nil, env(map[string]string{"SECKILL_ADMIN_TOKEN": "12345678"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	if diff := cmp.Diff(loopback, c.Limits.TrustedProxies, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("default trusted proxies (-want +got):\n%s", diff)
	}
	c, err = Load("test", nil, env(map[string]string{"SECKILL_ADMIN_TOKEN": "12345678",
		"SECKILL_TRUSTED_PROXIES": " 10.1.2.3, 172.16.9.9/12 ,::ffff:192.0.2.1", "SECKILL_RATE_EXEMPT": "none"}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.1.2.3/32"), netip.MustParsePrefix("172.16.0.0/12"), netip.MustParsePrefix("192.0.2.1/32")}
	if diff := cmp.Diff(want, c.Limits.TrustedProxies, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("trusted proxies (-want +got):\n%s", diff)
	}
	if len(c.Limits.Exempt) != 0 {
		t.Errorf("SECKILL_RATE_EXEMPT=none gave %v", c.Limits.Exempt)
	}
	for _, bad := range []string{"localhost", "10.0.0.0/33", "1.2.3", "none,10.0.0.1"} {
		if _, err := Load("test", nil, env(map[string]string{"SECKILL_ADMIN_TOKEN": "12345678", "SECKILL_RATE_EXEMPT": bad}), io.Discard); err == nil {
			t.Errorf("SECKILL_RATE_EXEMPT=%q accepted", bad)
		}
	}
	if _, err := Load("test", nil, env(map[string]string{"SECKILL_ADMIN_TOKEN": "12345678", "SECKILL_RATE_PER_CLIENT": "-1"}), io.Discard); err == nil {
		t.Error("a negative SECKILL_RATE_PER_CLIENT accepted")
	}
}

// TestClockOffset: the test-only clock offset of redis-getset is 0 unless set, and may be
// negative (a replica whose clock is behind).
func TestClockOffset(t *testing.T) {
	for _, tc := range []struct {
		set  string
		want time.Duration
	}{{"", 0}, {"1h", time.Hour}, {"-90s", -90 * time.Second}} {
		t.Run(tc.set, func(t *testing.T) {
			kv := map[string]string{"SECKILL_ADMIN_TOKEN": "12345678"}
			if tc.set != "" {
				kv["SECKILL_TEST_CLOCK_OFFSET"] = tc.set
			}
			c, err := Load("test", nil, env(kv), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if c.Test.ClockOffset != tc.want {
				t.Fatalf("clock offset = %s, want %s", c.Test.ClockOffset, tc.want)
			}
		})
	}
}

// TestRedisTopologyAlone: the tools' reading of the Redis settings alone gives what Load gives,
// with the app's defaults, and refuses what Load refuses.
func TestRedisTopologyAlone(t *testing.T) {
	got, err := RedisTopology(env(nil))
	if err != nil || got.Mode != redisconn.Single || strings.Join(got.Addrs, ",") != "127.0.0.1:6379" || got.Master != "seckill" {
		t.Errorf("RedisTopology(empty) = %+v, %v", got, err)
	}
	got, err = RedisTopology(env(map[string]string{"SECKILL_REDIS_MODE": "cluster", "SECKILL_REDIS_ADDRS": "a:1, b:2", "SECKILL_REDIS_ADDR": "x:9"}))
	if err != nil || got.Mode != redisconn.Cluster || strings.Join(got.Addrs, ",") != "a:1,b:2" {
		t.Errorf("RedisTopology(cluster) = %+v, %v", got, err)
	}
	if _, err := RedisTopology(env(map[string]string{"SECKILL_REDIS_ADDRS": "a:1,b:2"})); err == nil {
		t.Error("RedisTopology accepted a single Redis of two addresses")
	}
}
