// Package app is the seckill program: it reads the configuration, wires the adapters to the
// domain and runs one of the commands (serve, worker, migrate, seed) until its context ends;
// its client commands (products, buy, order, admin: remote.go) are the API's generated client
// (api/client) at a terminal. Both cmd/seckill and the end-to-end tests and load test run it, so
// that what is tested is what ships.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/seckill-go/seckill-go/internal/config"
	"github.com/seckill-go/seckill-go/internal/tracing"
)

const usage = `usage: seckill <command> [flags]

commands:
  serve    HTTP API + outbox relay + order consumer (each switchable: -api, -relay, -consumer)
  worker   outbox relay + order consumer, with /healthz, /readyz and /metrics only
  migrate  create the database if missing and apply pending migrations
  seed     create the demo products (one open sale per enabled strategy, one opening soon)
  token    print a buyer token per user id, signed with SECKILL_BUYER_JWT_HMAC_KEY (dev and tests)

clients of a running API (-url; -json for its answer as it is):
  products the listed products
  buy      one purchase: -product N -user U [-quantity 1] [-key K]; prints the receipt
  order    the buyer's order: -id O -user U
  admin    the admin API (-token or SECKILL_ADMIN_TOKEN): create -name N -price CENTS -stock N
           [-strategy S]; reset -product N [-stock N]

Run 'seckill <command> -h' for the settings; each flag has a SECKILL_* variable
(-otlp-endpoint: OpenTelemetry's OTEL_EXPORTER_OTLP_ENDPOINT).
`

// Options are what a caller in the same process (a test, the load test's smoke run) may hand
// the program besides its arguments and environment. The zero value is the command line's.
type Options struct {
	// Listener, if set, is where `serve` and `worker` serve HTTP instead of SECKILL_HTTP_ADDR:
	// a test binds it first (port 0), so that no other test can take the port in between.
	Listener net.Listener
	// Ready, if set, receives the HTTP listener's address once it accepts connections.
	Ready func(addr string)
	// Spans, if set, receives the spans of `serve` and `worker` instead of the OTLP exporter
	// when SECKILL_TRACING is on: a test's recorder. With tracing off it receives nothing.
	Spans sdktrace.SpanProcessor
}

// Run is the whole program.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, opts Options) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stderr, usage)
		if len(args) == 0 {
			return errors.New("no command given")
		}
		return nil
	}
	cmd := args[0]
	switch cmd {
	case "token":
		return token(args[1:], getenv, stdout, stderr)
	case "products":
		return products(ctx, args[1:], stdout, stderr)
	case "buy":
		return buy(ctx, args[1:], stdout, stderr)
	case "order":
		return order(ctx, args[1:], stdout, stderr)
	case "admin":
		return admin(ctx, args[1:], getenv, stdout, stderr)
	}
	cfg, err := config.Load("seckill "+cmd, args[1:], getenv, stderr)
	if err != nil {
		return err
	}
	var h slog.Handler = slog.NewJSONHandler(stdout, &slog.HandlerOptions{Level: cfg.LogLevel})
	if cfg.Tracing.Exporter != tracing.Off {
		h = tracing.LogHandler(h) // off, a log record costs no span lookup
	}
	log := slog.New(h).With("instance", cfg.InstanceID, "command", cmd)

	switch cmd {
	case "serve", "worker":
		if cmd == "worker" {
			cfg.Run.API = false
		}
		log.Info("starting", "config", cfg)
		fp, err := parseFailpoints(log, getenv(failpointEnv))
		if err != nil {
			return err
		}
		return serve(ctx, log, cfg, opts, fp)
	case "migrate":
		return migrate(ctx, log, cfg)
	case "seed":
		return seed(ctx, log, cfg)
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", cmd)
}
