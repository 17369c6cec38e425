package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestProbeURL(t *testing.T) {
	for _, tc := range []struct {
		listen, path, want, wantErr string
	}{
		{listen: "", path: "/healthz", want: "http://127.0.0.1:8080/healthz"},
		{listen: ":8080", path: "/readyz", want: "http://127.0.0.1:8080/readyz"},
		{listen: "0.0.0.0:9000", path: "/healthz", want: "http://127.0.0.1:9000/healthz"},
		{listen: "[::]:9000", path: "/healthz", want: "http://127.0.0.1:9000/healthz"},
		{listen: "10.0.0.5:8081", path: "/healthz", want: "http://10.0.0.5:8081/healthz"},
		{listen: "[fd00::5]:8081", path: "/healthz", want: "http://[fd00::5]:8081/healthz"},
		{listen: "8080", wantErr: "missing port"},
		{listen: "127.0.0.1:0", wantErr: "fixed port"},
	} {
		t.Run(tc.listen, func(t *testing.T) {
			got, err := probeURL(tc.listen, tc.path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("probeURL(%q) error = %v, want one containing %q", tc.listen, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("probeURL(%q, %q) = %q, %v; want %q", tc.listen, tc.path, got, err, tc.want)
			}
		})
	}
}

func TestRun(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz":
			io.WriteString(w, "ok")
		case "/readyz":
			http.Error(w, `{"error":"kafka"}`, http.StatusServiceUnavailable)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	closed := closedAddr(t)

	for _, tc := range []struct {
		name, addr string
		args       []string
		wantErr    string
	}{
		{name: "default path answers 200", addr: addr},
		{name: "explicit path answers 200", addr: addr, args: []string{"/healthz"}},
		{name: "503 fails", addr: addr, args: []string{"/readyz"}, wantErr: "503"},
		{name: "404 fails", addr: addr, args: []string{"/nope"}, wantErr: "404"},
		{name: "nothing listening fails", addr: closed, wantErr: "connect"},
		{name: "relative path refused", addr: addr, args: []string{"healthz"}, wantErr: "must start with /"},
		{name: "two paths refused", addr: addr, args: []string{"/a", "/b"}, wantErr: "at most one"},
		{name: "-addr instead of SECKILL_HTTP_ADDR", addr: closed, args: []string{"-addr", addr, "/healthz"}},
		{name: "-addr that does not answer", addr: addr, args: []string{"-addr", closed}, wantErr: "connect"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			getenv := func(k string) string {
				if k == "SECKILL_HTTP_ADDR" {
					return tc.addr
				}
				return ""
			}
			err := run(context.Background(), tc.args, getenv, io.Discard)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("run: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("run error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// closedAddr returns a 127.0.0.1 address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
