package app

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/config"
)

// TestShutdownDrains plays a SIGTERM under load: the process turns unready at once, refuses new
// connections, still answers a request sent on a kept-alive connection (closing it), and lets
// the request in flight finish before runProcess returns.
func TestShutdownDrains(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ready") })
	mux.HandleFunc("/ok", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.HandleFunc("/slow", func(w http.ResponseWriter, _ *http.Request) {
		close(entered)
		<-release
		_, _ = io.WriteString(w, "finished")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := "http://" + ln.Addr().String()
	cfg := &config.Config{}
	cfg.HTTP.ShutdownTimeout = 10 * time.Second
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	done := make(chan error, 1)
	go func() {
		done <- runProcess(ctx, slog.New(slog.DiscardHandler), cfg, ln, &parts{handler: mux}, nil)
	}()

	// One client keeps a connection alive, as a load balancer does; another has a purchase in flight.
	kept := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	get := func(c *http.Client, path string) (*http.Response, string) {
		t.Helper()
		res, err := c.Get(addr + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res, string(body)
	}
	if res, _ := get(kept, "/ok"); res.StatusCode != http.StatusOK || res.Close {
		t.Fatalf("before shutdown: %d, close %v", res.StatusCode, res.Close)
	}
	slow := make(chan string, 1)
	go func() {
		_, body := get(&http.Client{Transport: &http.Transport{}}, "/slow")
		slow <- body
	}()
	<-entered

	stop() // SIGTERM
	signalled := time.Now()
	var ready *http.Response
	for {
		res, _ := get(kept, "/readyz")
		if res.StatusCode != http.StatusOK {
			ready = res
			break
		}
		if time.Since(signalled) > 5*time.Second {
			t.Fatal("/readyz still 200 five seconds after shutdown began")
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("/readyz answered %d %s after shutdown began", ready.StatusCode, time.Since(signalled).Round(time.Microsecond))
	if ready.StatusCode != http.StatusServiceUnavailable || !ready.Close {
		t.Errorf("/readyz during shutdown: %d, Connection: close %v; want 503, closed", ready.StatusCode, ready.Close)
	}
	if c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		c.Close()
		t.Error("a new connection was accepted during shutdown: a load balancer would keep sending work")
	}
	select {
	case err := <-done:
		t.Fatalf("runProcess returned (%v) with a request in flight", err)
	case <-time.After(2 * drainQuiet):
	}
	close(release)
	if body := <-slow; body != "finished" {
		t.Errorf("the request in flight got %q, want it finished", body)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("runProcess = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("runProcess still running 10 s after its last request finished")
	}
}

// TestParseFailpoints: the chaos run's test hooks are off by default, refuse what they do not
// know (or one named twice), and stay inert while their trigger file does not exist. (That they
// kill the process is what make chaos shows; a test cannot survive it.)
func TestParseFailpoints(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	if fp, err := parseFailpoints(log, ""); err != nil || fp.consumerAfterCommit != nil || fp.persisterBeforeCommit != nil || fp.persisterAfterCommit != nil {
		t.Errorf("unset: %+v, %v; want no hook", fp, err)
	}
	for _, bad := range []string{"consumer-after-comit", "relay-after-publish", ":x", "persister-after-commit,", "persister-before-commit,persister-before-commit:x"} {
		if _, err := parseFailpoints(log, bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	never := t.TempDir() + "/never-created"
	fp, err := parseFailpoints(log, failpointConsumerAfterCommit+":"+never+","+failpointPersisterBeforeCommit+":"+never+","+failpointPersisterAfterCommit+":"+never)
	if err != nil || fp.consumerAfterCommit == nil || fp.persisterBeforeCommit == nil || fp.persisterAfterCommit == nil {
		t.Fatalf("armed with a trigger: %+v, %v", fp, err)
	}
	// No trigger file: each returns, and the test lives on.
	fp.consumerAfterCommit()
	fp.persisterBeforeCommit()
	fp.persisterAfterCommit()
	if fp, err := parseFailpoints(log, failpointPersisterAfterCommit+":"+never); err != nil || fp.persisterAfterCommit == nil || fp.consumerAfterCommit != nil {
		t.Errorf("one alone: %+v, %v; want only persisterAfterCommit", fp, err)
	}
}

// TestHolderStall: holder-stall@D stalls the holder that removes the trigger, for D, once per
// file; the others go on. Kill and stall can be armed together, each with its own trigger.
func TestHolderStall(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for _, bad := range []string{"holder-stall@", "holder-stall@-1s", "holder-stall@soon", "holder-kill@1s", "consumer-after-commit@1s", "holder-kill,holder-kill:x"} {
		if _, err := parseFailpoints(log, bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	trigger := t.TempDir() + "/stall"
	fp, err := parseFailpoints(log, "holder-stall@150ms:"+trigger+",holder-kill:"+t.TempDir()+"/never")
	if err != nil || fp.holderStall == nil || fp.holderKill == nil {
		t.Fatalf("armed: %+v, %v", fp, err)
	}
	hold := fp.holder()
	took := func() time.Duration { start := time.Now(); hold(); return time.Since(start) }
	if d := took(); d > 100*time.Millisecond {
		t.Errorf("no trigger file: stalled %s", d)
	}
	if err := os.WriteFile(trigger, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if d := took(); d < 150*time.Millisecond {
		t.Errorf("trigger present: stalled only %s, want 150ms", d)
	}
	if _, err := os.Stat(trigger); !os.IsNotExist(err) {
		t.Errorf("the stalled holder left its trigger: %v", err)
	}
	if d := took(); d > 100*time.Millisecond {
		t.Errorf("trigger consumed: stalled again %s", d)
	}
}
