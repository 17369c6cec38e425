// Package apptest starts the real program (internal/app) in the test's process against the
// services of the local stack, several instances sharing one fresh database and topic, as the
// replicas of a deployment do, and calls their API (Client). Imported only by _test files.
package apptest

import (
	"context"
	"maps"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/app"
	"github.com/seckill-go/seckill-go/internal/itest"
)

// AdminToken is the admin token of every test stack.
const AdminToken = "test-admin-token"

// Stack is one database and one Kafka topic of its own that several app instances share, as the
// replicas of a deployment do.
type Stack struct {
	DSN string
	// Env holds the SECKILL_* settings every instance gets (the DSN aside).
	Env map[string]string
}

// NewStack creates the database and the topic for this test.
func NewStack(tb testing.TB) *Stack {
	tb.Helper()
	itest.Integration(tb)
	kcfg := itest.Topic(tb, 6)
	return &Stack{
		DSN: itest.DatabaseDSN(tb),
		Env: map[string]string{
			"SECKILL_REDIS_ADDR":       itest.RedisAddr,
			"SECKILL_REDIS_MODE":       string(itest.RedisTopology.Mode),
			"SECKILL_REDIS_ADDRS":      strings.Join(itest.RedisTopology.Addrs, ","),
			"SECKILL_REDIS_MASTER":     itest.RedisTopology.Master,
			"SECKILL_ZK_SERVERS":       strings.Join(itest.ZKServers, ","),
			"SECKILL_KAFKA_BROKERS":    kcfg.Brokers[0],
			"SECKILL_KAFKA_TOPIC":      kcfg.Topic,
			"SECKILL_KAFKA_GROUP":      kcfg.GroupID,
			"SECKILL_ADMIN_TOKEN":      AdminToken,
			"SECKILL_SHUTDOWN_TIMEOUT": "5s",
			// go test runs two packages at once, and one of them may run a dozen instances (four
			// stampedes of three replicas): 12 × 6 plus the other package stay under MariaDB's
			// default max_connections of 151, where a refused connection would be a 503.
			"SECKILL_MYSQL_MAX_OPEN_CONNS": "6",
			"SECKILL_LOG_LEVEL":            "warn",
		},
	}
}

// Getenv returns the environment of one instance: overrides, then the stack's settings.
func (s *Stack) Getenv(overrides map[string]string) func(string) string {
	return func(k string) string {
		if v, ok := overrides[k]; ok {
			return v
		}
		if k == "SECKILL_MYSQL_DSN" {
			return s.DSN
		}
		return s.Env[k]
	}
}

// App is one instance of the program running in this process.
type App struct {
	URL  string
	Stop func()
}

// Start runs `seckill serve` in this process on a port of its own and returns once it serves;
// the test's cleanup stops it.
func (s *Stack) Start(tb testing.TB, overrides map[string]string) *App {
	tb.Helper()
	return s.serve(tb, listen(tb), overrides, app.Options{})
}

// StartWith is Start with the in-process options opts (a test's span recorder, say); their
// Listener and Ready are the stack's own.
func (s *Stack) StartWith(tb testing.TB, overrides map[string]string, opts app.Options) *App {
	tb.Helper()
	return s.serve(tb, listen(tb), overrides, opts)
}

// listen binds a port of 127.0.0.1 for one instance. The test binds it and hands it over, so that
// no other test can take the port between its choice and its use.
func listen(tb testing.TB) net.Listener {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() }) // the program closes it when it stops; this, if it never starts
	return ln
}

// serve runs `seckill serve` on ln and returns once it serves; the test's cleanup stops it.
func (s *Stack) serve(tb testing.TB, ln net.Listener, overrides map[string]string, opts app.Options) *App {
	tb.Helper()
	env := maps.Clone(overrides)
	if env == nil {
		env = map[string]string{}
	}
	env["SECKILL_HTTP_ADDR"] = ln.Addr().String() // what the program reports; it serves on ln
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{}, 1)
	done := make(chan error, 1)
	logs := itest.LogWriter()
	go func() {
		opts.Listener, opts.Ready = ln, func(string) { ready <- struct{}{} }
		done <- app.Run(ctx, []string{"serve"}, s.Getenv(env), logs, logs, opts)
	}()
	select {
	case <-ready:
	case err := <-done:
		cancel()
		tb.Fatalf("app did not start: %v", err)
	case <-time.After(90 * time.Second):
		cancel()
		tb.Fatal("app did not start within 90 s")
	}
	a := &App{URL: "http://" + ln.Addr().String()}
	var once sync.Once
	a.Stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				tb.Errorf("app stopped with %v", err)
			}
		})
	}
	tb.Cleanup(a.Stop)
	return a
}

// Cluster starts n instances on one fresh stack. It binds every instance's port first, so that
// each knows all of them as its peers (SECKILL_PEERS), as scripts/env.sh configures the local
// replicas. It returns the stack and the instances' base URLs.
func Cluster(tb testing.TB, n int, env map[string]string) (*Stack, []string) {
	tb.Helper()
	s := NewStack(tb)
	lns := make([]net.Listener, n)
	urls := make([]string, n)
	for i := range n {
		lns[i] = listen(tb)
		urls[i] = "http://" + lns[i].Addr().String()
	}
	over := map[string]string{"SECKILL_PEERS": strings.Join(urls, ",")}
	maps.Copy(over, env)
	for _, ln := range lns {
		s.serve(tb, ln, over, app.Options{})
	}
	return s, urls
}
