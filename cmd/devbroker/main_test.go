package main

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"
)

// TestRun starts the real run on a free port, checks that it listens, and that it shuts down
// cleanly, reaper included, when its context ends.
func TestRun(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdout, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-port", "0", "-topics", testTopic, "-sync=false", "-log-level", "none"}, w, io.Discard)
		w.Close()
	}()

	lines := bufio.NewScanner(stdout)
	if !lines.Scan() {
		t.Fatalf("run printed nothing: %v", <-done)
	}
	// devbroker: listening on 127.0.0.1:PORT (topics=...
	fields := strings.Fields(lines.Text())
	if len(fields) < 4 || fields[1] != "listening" {
		t.Fatalf("first line %q, want the listening line", lines.Text())
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	conn, err := net.DialTimeout("tcp", fields[3], 5*time.Second)
	if err != nil {
		t.Fatalf("dial the broker: %v", err)
	}
	conn.Close()

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return 10 s after its context ended")
	}
}

func TestParseLogLevel(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in      string
		want    slog.Level
		wantErr bool
	}{
		{in: "none", want: levelNone},
		{in: "error", want: slog.LevelError},
		{in: "WARN", want: slog.LevelWarn},
		{in: "info", want: slog.LevelInfo},
		{in: "debug", want: slog.LevelDebug},
		{in: "trace", wantErr: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseLogLevel(tc.in)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("parseLogLevel(%q) = %v, %v; want %v, error %t", tc.in, got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// TestListenFnAdvertise: with -advertise, the broker binds -host and tells clients the advertised
// name with the port it really got, which is what kfake puts in its metadata answers.
func TestListenFnAdvertise(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, advertise, wantHost string
	}{
		{name: "bound address", advertise: "", wantHost: "127.0.0.1"},
		{name: "advertised name", advertise: "kafka", wantHost: "kafka"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ln, err := listenFn("127.0.0.1", tc.advertise)("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			host, port, err := net.SplitHostPort(ln.Addr().String())
			if err != nil || host != tc.wantHost || port == "0" {
				t.Fatalf("Addr() = %q (%v), want %s:<the bound port>", ln.Addr(), err, tc.wantHost)
			}
			conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", port), 5*time.Second)
			if err != nil {
				t.Fatalf("dial the bound port: %v", err)
			}
			conn.Close()
		})
	}
}
