package app

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync/atomic"
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

// TestHolderPause: holder-pause@D stops the whole process — this test's, here — for D when its
// trigger appears, once per file, and only for the strategy the file names, if it names one; kill
// and pause can be armed together, each with its own trigger.
func TestHolderPause(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for _, bad := range []string{"holder-pause@", "holder-pause@-1s", "holder-pause@soon", "holder-kill@1s", "consumer-after-commit@1s", "holder-kill,holder-kill:x", "holder-pause,holder-pause@1s"} {
		if _, err := parseFailpoints(log, bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	trigger := t.TempDir() + "/pause"
	fp, err := parseFailpoints(log, "holder-pause@300ms:"+trigger+",holder-kill:"+t.TempDir()+"/never")
	if err != nil || fp.holderPause == nil || fp.holderKill == nil {
		t.Fatalf("armed: %+v, %v", fp, err)
	}
	hold := fp.holder()
	// A ticker counts the time the process ran: a paused process misses the ticks of its pause,
	// where a sleeping goroutine would not.
	var ticks atomic.Int64
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tk := time.NewTicker(10 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-tk.C:
				ticks.Add(1)
			case <-stop:
				return
			}
		}
	}()
	took := func(st string) time.Duration { start := time.Now(); hold(st); return time.Since(start) }
	if d := took("zk"); d > 200*time.Millisecond {
		t.Errorf("no trigger file: held %s", d)
	}
	for _, f := range []string{trigger + ".mysql-for-update"} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if d := took("zk"); d > 200*time.Millisecond {
		t.Errorf("a trigger of another strategy paused zk for %s", d)
	}
	before := ticks.Load()
	if d := took("mysql-for-update"); d < 300*time.Millisecond {
		t.Errorf("its trigger present: paused only %s, want 300ms", d)
	}
	// Ticks missed while stopped are dropped (a Ticker's channel holds one): 300 ms of running
	// would have counted ~30.
	if n := ticks.Load() - before; n > 10 {
		t.Errorf("%d ticks during the pause: the process kept running", n)
	}
	if _, err := os.Stat(trigger + ".mysql-for-update"); !os.IsNotExist(err) {
		t.Errorf("the paused holder left its trigger: %v", err)
	}
	if d := took("mysql-for-update"); d > 200*time.Millisecond {
		t.Errorf("trigger consumed: paused again for %s", d)
	}
}

// TestHolderHold: holder-hold@D keeps the holder in its critical section for D when its trigger
// appears, once per file, while the rest of the process runs; it is armed beside the other two.
func TestHolderHold(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for _, bad := range []string{"holder-hold@", "holder-hold@0s", "holder-hold,holder-hold@1s"} {
		if _, err := parseFailpoints(log, bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	dir := t.TempDir()
	trigger := dir + "/hold"
	fp, err := parseFailpoints(log, "holder-hold@300ms:"+trigger+",holder-pause@1h:"+dir+"/never,holder-kill:"+dir+"/never")
	if err != nil || fp.holderHold == nil || fp.holderPause == nil || fp.holderKill == nil {
		t.Fatalf("armed: %+v, %v", fp, err)
	}
	hold := fp.holder()
	took := func(st string) time.Duration { start := time.Now(); hold(st); return time.Since(start) }
	if d := took("redlock"); d > 200*time.Millisecond {
		t.Errorf("no trigger file: held %s", d)
	}
	if err := os.WriteFile(trigger+".redlock", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if d := took("memcached"); d > 200*time.Millisecond {
		t.Errorf("another strategy's trigger held memcached for %s", d)
	}
	if d := took("redlock"); d < 300*time.Millisecond {
		t.Errorf("its trigger present: held only %s, want 300ms", d)
	}
	if d := took("redlock"); d > 200*time.Millisecond {
		t.Errorf("trigger consumed: held again for %s", d)
	}
	if fp, err := parseFailpoints(log, "holder-hold"); err != nil || fp.holderHold == nil {
		t.Errorf("no duration: %v (want the default %s)", err, defaultHold)
	}
}
