package redisconn

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		t    Topology
		want string // "" valid, else part of the error
	}{
		{"single", Topology{Mode: Single, Addrs: []string{"a:1"}}, ""},
		{"single of two", Topology{Mode: Single, Addrs: []string{"a:1", "b:2"}}, "takes one Redis address"},
		{"no address", Topology{Mode: Cluster}, "no Redis address"},
		{"cluster of one seed", Topology{Mode: Cluster, Addrs: []string{"a:1"}}, ""},
		{"sentinel", Topology{Mode: Sentinel, Addrs: []string{"a:1"}, Master: "m"}, ""},
		{"sentinel without a master", Topology{Mode: Sentinel, Addrs: []string{"a:1"}}, "name of the Redis master"},
		{"unknown mode", Topology{Mode: "ring", Addrs: []string{"a:1"}}, "unknown Redis mode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.t.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate() = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

// TestOpenPicksTheNamedTopology: the client type follows the mode, never the number of addresses.
func TestOpenPicksTheNamedTopology(t *testing.T) {
	for _, tc := range []struct {
		t       Topology
		cluster bool
	}{
		{Topology{Mode: Single, Addrs: []string{"127.0.0.1:1"}}, false},
		{Topology{Mode: Cluster, Addrs: []string{"127.0.0.1:1"}}, true},
		{Topology{Mode: Sentinel, Addrs: []string{"127.0.0.1:1", "127.0.0.1:2"}, Master: "m"}, false},
	} {
		rdb := Open(tc.t, redis.UniversalOptions{})
		_, isCluster := rdb.(*redis.ClusterClient)
		_, isClient := rdb.(*redis.Client)
		if isCluster != tc.cluster || isClient == tc.cluster {
			t.Errorf("%s: got a %T", tc.t, rdb)
		}
		if c, ok := rdb.(*redis.ClusterClient); ok && c.Options().ClusterStateReloadInterval != ClusterReload {
			t.Errorf("the cluster client reads its slots every %s, want %s", c.Options().ClusterStateReloadInterval, ClusterReload)
		}
		_ = rdb.Close()
	}
}

func TestParseMode(t *testing.T) {
	for in, want := range map[string]Mode{"": Single, "single": Single, " Cluster ": Cluster, "SENTINEL": Sentinel} {
		if got, err := ParseMode(in); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseMode("ring"); err == nil {
		t.Error(`ParseMode("ring") succeeded`)
	}
}

// TestSlogPrintf: go-redis's own lines, through the logger SetLogger installs, are warnings of the
// structured log, one line each.
func TestSlogPrintf(t *testing.T) {
	var buf bytes.Buffer
	slogPrintf{slog.New(slog.NewJSONHandler(&buf, nil)).With("component", "go-redis")}.Printf(context.Background(), "redis: connection pool: failed to dial after %d attempts: %v\n", 1, "refused")
	var line struct{ Level, Msg, Component string }
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("%v: %q", err, buf.String())
	}
	if line.Level != "WARN" || line.Component != "go-redis" || line.Msg != "redis: connection pool: failed to dial after 1 attempts: refused" {
		t.Fatalf("logged %+v", line)
	}
}

// lockedBuffer is a bytes.Buffer that go-redis's goroutines and the test may use at once.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestSetLoggerRoutesGoRedis: once SetLogger ran, a line go-redis itself logs (here: an expiry
// below its millisecond resolution, which it truncates and says so, before it sends anything)
// reaches the slog JSON log as a warning of component go-redis, and not stderr. No Redis is
// needed: the line is logged while the command is built.
func TestSetLoggerRoutesGoRedis(t *testing.T) {
	var out lockedBuffer
	SetLogger(slog.New(slog.NewJSONHandler(&out, nil)))
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	defer rdb.Close()
	_ = rdb.Set(t.Context(), "redisconn-logger-test", "v", 500*time.Microsecond).Err() // no server: fails, logged first
	var found bool
	for line := range strings.Lines(out.String()) {
		var l struct{ Level, Msg, Component string }
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("not a JSON line: %q (%v)", line, err)
		}
		if strings.Contains(l.Msg, "truncating to 1ms") {
			found = l.Level == "WARN" && l.Component == "go-redis"
		}
	}
	if !found {
		t.Fatalf("go-redis's truncation line not logged as a go-redis warning; the log:\n%s", out.String())
	}
}
