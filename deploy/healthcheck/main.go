// Command healthcheck is the health probe of the seckill container image. The runtime image is
// built FROM scratch and has no shell, curl or wget, so the Dockerfile's HEALTHCHECK and the
// compose healthchecks run this: it GETs a path of the seckill process in the same container and
// exits 0 on a 2xx answer, 1 otherwise.
//
//	healthcheck [-timeout 2s] [-addr HOST:PORT] [PATH]
//
// PATH defaults to /healthz (the process is up); compose uses /readyz (its dependencies answer).
// The port comes from SECKILL_HTTP_ADDR, as the server's does (default :8080); a wildcard or empty
// host is probed on 127.0.0.1. -addr names another server instead: the Jaeger image of
// docker-compose.yml's profile tracing, also FROM scratch, probes its own health endpoint with it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Getenv, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "healthcheck:", err)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	timeout := fs.Duration("timeout", 2*time.Second, "longest wait for the answer")
	addr := fs.String("addr", "", "HOST:PORT to probe instead of SECKILL_HTTP_ADDR's")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 1 {
		return fmt.Errorf("at most one PATH, got %q", fs.Args())
	}
	path := "/healthz"
	if fs.NArg() == 1 {
		path = fs.Arg(0)
	}
	if !strings.HasPrefix(path, "/") {
		return fmt.Errorf("PATH %q must start with /", path)
	}
	listen := getenv("SECKILL_HTTP_ADDR")
	if *addr != "" {
		listen = *addr
	}
	target, err := probeURL(listen, path)
	if err != nil {
		return err
	}

	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 512))
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return fmt.Errorf("GET %s: %s %s", target, res.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// probeURL turns the server's listen address into the URL to probe.
func probeURL(listen, path string) (string, error) {
	if listen == "" {
		listen = ":8080"
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("SECKILL_HTTP_ADDR=%q: %w", listen, err)
	}
	if port == "" || port == "0" {
		return "", fmt.Errorf("SECKILL_HTTP_ADDR=%q: a fixed port is needed to probe it", listen)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + path, nil
}
