package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/seckill-go/seckill-go/internal/board"
	"github.com/seckill-go/seckill-go/internal/buyer"
	"github.com/seckill-go/seckill-go/internal/changefeed"
	"github.com/seckill-go/seckill-go/internal/checkout"
	"github.com/seckill-go/seckill-go/internal/config"
	"github.com/seckill-go/seckill-go/internal/httpapi"
	"github.com/seckill-go/seckill-go/internal/livestats"
	"github.com/seckill-go/seckill-go/internal/metrics"
	"github.com/seckill-go/seckill-go/internal/orderqueue"
	"github.com/seckill-go/seckill-go/internal/payment"
	"github.com/seckill-go/seckill-go/internal/ratelimit"
	"github.com/seckill-go/seckill-go/internal/reconcile"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/stampede"
	"github.com/seckill-go/seckill-go/internal/stampede/redisboard"
	"github.com/seckill-go/seckill-go/internal/stock/redislua"
	"github.com/seckill-go/seckill-go/internal/tracing"
	"github.com/seckill-go/seckill-go/web"
)

// serve runs the process until ctx ends: it opens the resources, builds the parts that run on
// them, serves HTTP, and shuts down in reverse order of construction — a running stampede first
// (it would send purchases to a closing server), HTTP (in-flight purchases finish), the workers
// (relay, consumer, the live counters' last flush, the sale state's refresh), then every resource
// in reverse order of opening (the combiners decide what is still queued, the Kafka writer
// flushes, ZooKeeper's session ends, dropping any lock node left, then Redis and the database).
func serve(ctx context.Context, log *slog.Logger, cfg *config.Config, opts Options, fp failpoints) error {
	startCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	tr, err := tracing.New(startCtx, tracing.Options{Exporter: cfg.Tracing.Exporter, Sample: cfg.Tracing.Sample,
		Endpoint: cfg.Tracing.Endpoint, Instance: cfg.InstanceID, Processor: opts.Spans})
	if err != nil {
		return err
	}
	// Deferred first, so run last: the spans of the shutdown itself are sent too.
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tr.Shutdown(sctx); err != nil {
			log.Warn("tracing shutdown", "err", err)
		}
	}()
	res, err := openResources(startCtx, log, cfg, tr, fp)
	if err != nil {
		return err
	}
	defer res.Close()

	// Listen before building the API: a stampede sends its buyers to this replica's own address
	// when no peers are configured, and with port 0 that address is known only now.
	ln := opts.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.HTTP.Addr); err != nil {
			return fmt.Errorf("listen %s: %w", cfg.HTTP.Addr, err)
		}
	}
	defer ln.Close()

	p, err := res.build(ln.Addr(), fp)
	if err != nil {
		return err
	}
	return runProcess(ctx, log, cfg, ln, p, opts.Ready)
}

// worker is a background task of the process: it runs until its ctx ends and returns nil, or
// returns an error that stops the process.
type worker func(context.Context) error

// parts are what runs on the resources: the HTTP handler and the workers around it.
type parts struct {
	handler http.Handler
	// front stop as soon as shutdown begins, before HTTP drains (the stampede runner must not send
	// new purchases to a server that is closing); back stop once HTTP has drained (the relay
	// publishes the last purchases, the live counters record them).
	front, back []worker
}

// build makes the parts of the process the configuration asks for: the outbox relay, the order
// consumer, and the sale service with the HTTP API (or only the ops endpoints for a worker),
// with the test failpoints armed, if any.
func (r *resources) build(self net.Addr, fp failpoints) (*parts, error) {
	cfg, log := r.cfg, r.log
	p := &parts{}
	wake := func() {}
	lifecycle := r.metrics.RegisterLifecycle()
	if cfg.Run.Relay {
		var err error
		if wake, err = r.buildRelays(lifecycle, p); err != nil {
			return nil, err
		}
	}
	if cfg.Run.Consumer {
		if err := r.buildConsumers(lifecycle, fp, p); err != nil {
			return nil, err
		}
	}
	if r.persister != nil {
		p.back = append(p.back, func(ctx context.Context) error {
			return r.persister.Run(ctx, func(ctx context.Context) ([]int64, error) {
				return r.store.ProductIDsWithStrategy(ctx, sale.StrategyRedisLua)
			}, cfg.Persist.Every)
		})
	}
	deps := httpapi.Deps{Log: log, HTTPMetrics: r.metrics, Strategies: servedStrategies(cfg)}
	feed, err := changefeed.New(log.With("component", "changefeed"), r.rdb, cfg.DatabaseName())
	if err != nil {
		return nil, err
	}
	if cfg.Run.API || cfg.Run.Expirer {
		if err := r.buildCheckout(feed, fp, &deps, p); err != nil {
			return nil, err
		}
	}
	if cfg.Run.API {
		if err := r.buildSales(self, wake, feed, &deps, p); err != nil {
			return nil, err
		}
	} else if cfg.Run.Expirer {
		// The worker only publishes (units came back): it keeps no sale state to apply changes to.
		p.back = append(p.back, func(ctx context.Context) error { return feed.Run(ctx, func(sale.Change) {}) })
	}
	if cfg.Reconcile.Every > 0 {
		loop, err := reconcile.New(r.store.DB(), r.metrics.RegisterReconcile(), reconcile.Options{
			Every: cfg.Reconcile.Every, Log: log.With("component", "reconcile")})
		if err != nil {
			return nil, err
		}
		p.back = append(p.back, loop.Run)
	}
	if cfg.HTTP.PprofAddr != "" {
		w, err := pprofWorker(log, cfg.HTTP.PprofAddr)
		if err != nil {
			return nil, err
		}
		p.back = append(p.back, w)
	}
	h, err := httpapi.New(deps, r.apiConfig())
	if err != nil {
		return nil, err
	}
	p.handler = httpapi.PlantedSlowdown(h, cfg.HTTP.PlantedSlowdown)
	return p, nil
}

// buildRelays makes the outbox's relays, each over a Kafka writer of its own: the orders' relay,
// which a reservation wakes (it returns that wake-up), and the order events' relay, which polls.
func (r *resources) buildRelays(lifecycle *metrics.Lifecycle, p *parts) (wake func(), err error) {
	cfg, log := r.cfg, r.log
	w, events := orderqueue.NewWriter(log, r.kafka), orderqueue.NewWriter(log, r.kafka.Lifecycle())
	r.onClose(func() {
		for _, w := range []io.Closer{w, events} {
			if err := w.Close(); err != nil {
				log.Warn("kafka writer close", "err", err)
			}
		}
	})
	relay, err := orderqueue.NewRelay(log.With("component", "relay"), r.store, w, r.metrics, orderqueue.RelayConfig{Owner: cfg.InstanceID})
	if err != nil {
		return nil, err
	}
	relay.SetTracing(r.tracing)
	if r.persister != nil {
		r.persister.SetPersisted(relay.Wake)
	}
	// Nothing wakes the event relay: an order event waits for its next poll, 250 ms at most.
	eventRelay, err := orderqueue.NewEventRelay(log.With("component", "event-relay"), r.store, events, lifecycle, orderqueue.RelayConfig{Owner: cfg.InstanceID})
	if err != nil {
		return nil, err
	}
	eventRelay.SetTracing(r.tracing)
	p.back = append(p.back, relay.Run, eventRelay.Run)
	return relay.Wake, nil
}

// buildConsumers makes the consumers of the orders' topic (it confirms the orders) and of the
// order events' topic, with the consumer's test failpoint armed, if any.
func (r *resources) buildConsumers(lifecycle *metrics.Lifecycle, fp failpoints, p *parts) error {
	log := r.log
	c, err := orderqueue.NewConsumer(log.With("component", "consumer"), r.kafka, r.store, r.metrics)
	if err != nil {
		return err
	}
	c.SetTracing(r.tracing)
	if fp.consumerAfterCommit != nil {
		c.SetAfterConfirm(fp.consumerAfterCommit)
	}
	ec, err := orderqueue.NewEventConsumer(log.With("component", "event-consumer"), r.kafka.Lifecycle(), r.store, lifecycle)
	if err != nil {
		return err
	}
	ec.SetTracing(r.tracing)
	p.back = append(p.back, c.Run, ec.Run)
	return nil
}

// apiConfig is the HTTP API's configuration: the ops endpoints only, unless this process serves
// the API.
func (r *resources) apiConfig() httpapi.Config {
	cfg := r.cfg
	return httpapi.Config{
		AdminToken:           cfg.AdminToken,
		TrustedProxies:       prefixStrings(cfg.Limits.TrustedProxies),
		RateExempt:           cfg.Limits.Exempt,
		MaxInflightPurchases: cfg.Limits.MaxInflight,
		Ready:                r.checks(),
		Topology:             map[string]string{"redis": cfg.Redis.Topology.String(), "zookeeper": strings.Join(cfg.ZK.Servers, ",")},
		Metrics:              r.metrics.Handler(),
		Tracing:              r.tracing,
		Web:                  web.FS(),
		OpsOnly:              !cfg.Run.API,
		Streams: httpapi.StreamConfig{
			Max:       cfg.Read.StreamsMax,
			PerClient: cfg.Read.StreamsPerClient,
			Heartbeat: cfg.Read.Heartbeat,
			MinGap:    cfg.Read.StreamMinGap,
		},
	}
}

// buildCheckout makes the order lifecycle's service (pay, cancel) over the simulated payment
// provider and the strategies' returns, for the API, and its expirer when this process runs one.
func (r *resources) buildCheckout(feed *changefeed.Feed, fp failpoints, deps *httpapi.Deps, p *parts) error {
	cfg := r.cfg
	provider, err := payment.New(r.store.DB(), payment.Options{Latency: cfg.Payment.Latency, FailureRate: cfg.Payment.FailureRate})
	if err != nil {
		return err
	}
	returners, err := r.returners()
	if err != nil {
		return err
	}
	queues, err := r.roomReturns()
	if err != nil {
		return err
	}
	svc, err := checkout.New(r.store, provider, returners, feed, checkout.Options{Log: r.log.With("component", "checkout"),
		Metrics: r.metrics.RegisterCheckout(), Queues: queues})
	if err != nil {
		return err
	}
	if fp.expirerAfterExpire != nil {
		svc.SetAfterExpire(func([]sale.ClosedOrder) { fp.expirerAfterExpire() })
	}
	deps.Orders = svc
	if cfg.Run.Expirer {
		p.back = append(p.back, func(ctx context.Context) error { return svc.Run(ctx, cfg.Payment.ExpireEvery) })
	}
	return nil
}

// buildSales makes the sale service over the strategies this process serves, the change feed
// between replicas, the storefront's live counters and the stampede launcher, and hands them to
// the API.
func (r *resources) buildSales(self net.Addr, wake func(), feed *changefeed.Feed, deps *httpapi.Deps, p *parts) error {
	cfg, log := r.cfg, r.log
	deductors, err := r.deductors()
	if err != nil {
		return err
	}
	live, err := livestats.NewRecorder(log.With("component", "livestats"), r.liveRDB, livestats.Options{
		Namespace: cfg.DatabaseName(),
		Metrics:   r.metrics.RegisterLiveStats(),
	})
	if err != nil {
		return err
	}
	admission, err := r.admission()
	if err != nil {
		return err
	}
	clients, err := r.clientLimit()
	if err != nil {
		return err
	}
	if clients != nil {
		deps.ClientLimit = clients
	}
	reads, err := r.buildReads(live, deps, p)
	if err != nil {
		return err
	}
	signer, passes, err := passKeys(log, cfg)
	if err != nil {
		return err
	}
	deps.JWKS = passes.JWKS()
	queue, ticker, err := r.waitingRooms(signer, reads)
	if err != nil {
		return err
	}
	deps.Queue = queue
	if err := r.botChallenge(deps); err != nil {
		return err
	}
	svc, err := sale.NewService(sale.Options{
		Admission:       admission,
		Passes:          passes,
		Store:           r.store,
		Deductors:       deductors,
		DefaultStrategy: cfg.Sale.DefaultStrategy,
		NewOrderID:      newOrderID,
		Observer:        observers{r.metrics, live},
		Feed:            feed,
		Refresh:         cfg.Sale.Refresh,
		Log:             log.With("component", "sale"),
		OnReserve:       wake,
		OnChanged:       reads.Learn,
		TraceParent:     r.traceParent(),
	})
	if err != nil {
		return err
	}
	token, err := r.buyerTokens(deps)
	if err != nil {
		return err
	}
	runner, launcher, err := r.buildStampedes(self, token, svc)
	if err != nil {
		return err
	}
	deps.Sales, deps.Stampedes, deps.Live = svc, launcher, live
	p.front = append(p.front, runner.Run)
	p.back = append(p.back, live.Run, svc.Run, reads.Run, ticker.Run, func(ctx context.Context) error {
		return feed.Run(ctx, func(c sale.Change) {
			svc.ApplyChange(c)
			reads.Apply(c)
			ticker.Apply(c)
		})
	})
	return nil
}

// buyerTokens has the API verify buyer tokens when purchases need one, and returns what signs the
// tokens of a stampede's buyers: nil when purchases need none, or when the tokens are verified
// with a public key and this replica cannot sign them (it warns: the stampede's purchases will be
// refused).
func (r *resources) buyerTokens(deps *httpapi.Deps) (func(string) (string, error), error) {
	cfg := r.cfg
	token, err := stampedeTokens(cfg.Buyer.Tokens)
	if err != nil {
		return nil, err
	}
	if cfg.Buyer.Tokens.Enabled() && token == nil {
		r.log.Warn("buyer tokens are verified with a public key: a stampede cannot sign its buyers' tokens, and their purchases will be refused (401)")
	}
	if cfg.Buyer.Tokens.Enabled() {
		if deps.Buyers, err = buyer.NewVerifier(cfg.Buyer.Tokens); err != nil {
			return nil, err
		}
	}
	return token, nil
}

// buildStampedes makes the admin's demo stampedes: the runner, which sends its buyers to the
// configured peers (this replica's own address, self, when there are none) with their tokens
// from token, its progress kept in Redis, and the launcher that starts it on svc's products.
func (r *resources) buildStampedes(self net.Addr, token func(string) (string, error), svc *sale.Service) (*stampede.Runner, *stampede.Launcher, error) {
	cfg := r.cfg
	board, err := redisboard.NewBoard(r.liveRDB, 0)
	if err != nil {
		return nil, nil, err
	}
	targets := cfg.Stampede.Peers
	if len(targets) == 0 {
		targets = []string{selfURL(self)}
	}
	runner, err := stampede.New(r.log.With("component", "stampede"), stampede.Options{
		Targets:   targets,
		MaxBuyers: cfg.Stampede.MaxBuyers,
		Board:     board,
		Token:     token,
	})
	if err != nil {
		return nil, nil, err
	}
	launcher, err := stampede.NewLauncher(runner, svc)
	if err != nil {
		return nil, nil, err
	}
	return runner, launcher, nil
}

// buildReads makes the read side: the board every public read is answered from (the products
// from MySQL, redis-lua's live stock and the rates from Redis), the per-client limit of reads, and
// the end of the event streams as soon as shutdown begins.
func (r *resources) buildReads(rates *livestats.Recorder, deps *httpapi.Deps, p *parts) (*board.Board, error) {
	cfg := r.cfg
	m := r.metrics.RegisterReads()
	b, err := board.New(board.Options{
		Store:   r.store,
		Live:    map[sale.Strategy]board.LiveStock{sale.StrategyRedisLua: redislua.NewStocks(r.rdb, cfg.DatabaseName())},
		Rates:   rates,
		Render:  httpapi.Renderer{},
		Metrics: m,
		Refresh: cfg.Read.Refresh,
		Log:     r.log.With("component", "board"),
	})
	if err != nil {
		return nil, err
	}
	// The first read before the API serves: a replica answers reads from its first request. If it
	// fails, reads answer 503 until Run's next refresh succeeds.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b.Refresh(ctx)
	deps.Board, deps.StreamMetrics = b, m
	if l := ratelimit.NewLocal(ratelimit.Limit{PerSecond: cfg.Read.PerClientRate, Burst: cfg.Read.PerClientBurst}); l != nil {
		deps.ReadLimit = l
	}
	closing := make(chan struct{})
	deps.Closing = closing
	p.front = append(p.front, func(ctx context.Context) error {
		<-ctx.Done()
		close(closing)
		return nil
	})
	return b, nil
}

// prefixStrings is ps as gin takes trusted proxies.
func prefixStrings(ps []netip.Prefix) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}

// checks are the dependency checks of /readyz.
func (r *resources) checks() map[string]httpapi.Check {
	return map[string]httpapi.Check{
		"mysql":     r.store.Ping,
		"redis":     func(ctx context.Context) error { return r.rdb.Ping(ctx).Err() },
		"zookeeper": r.zk.Ping,
		"kafka":     func(ctx context.Context) error { return orderqueue.Ping(ctx, r.kafka) },
	}
}

// selfURL is the base URL at which this process reaches its own listener: the loopback address
// when it listens on every interface.
func selfURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String()
	}
	if ip := net.ParseIP(host); host == "" || ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// newOrderID returns a UUIDv7: unique without coordination, and sorted by time, which keeps the
// unique index on order_id append-mostly.
func newOrderID() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}

// observers tells each of its members of every purchase attempt.
type observers []sale.Observer

func (os observers) ObservePurchase(o sale.Observation) {
	for _, x := range os {
		x.ObservePurchase(o)
	}
}

// runProcess serves HTTP on ln and runs the workers until ctx ends or the listener or a worker
// fails. The front workers stop as soon as shutdown begins, the back ones once HTTP has drained.
//
// Shutdown turns the process unready first (/readyz answers 503 at once), stops the front
// workers, closes the listener (a load balancer's new connections are refused and go to another
// replica), lets the requests still arriving on kept-alive connections in, each answered with
// "Connection: close", until none has come for drainQuiet, then waits for the requests in flight
// (http.Server.Shutdown, bounded by SECKILL_SHUTDOWN_TIMEOUT): no purchase that reached this
// process is cut off.
func runProcess(ctx context.Context, log *slog.Logger, cfg *config.Config, ln net.Listener, p *parts, ready func(string)) error {
	drain := newDrain(p.handler)
	ln = &closeOnceListener{Listener: ln}
	srv := &http.Server{
		Handler:           drain,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		// Above the API's own limit, so that an oversized head gets its JSON 431 (httpapi).
		MaxHeaderBytes: httpapi.ServerMaxHeaderBytes,
	}
	errs := make(chan error, len(p.front)+len(p.back))
	frontCtx, stopFront := context.WithCancel(ctx)
	defer stopFront()
	front := start(frontCtx, p.front, errs)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	log.Info("listening", "addr", ln.Addr().String(), "api", cfg.Run.API, "relay", cfg.Run.Relay, "consumer", cfg.Run.Consumer)
	if ready != nil {
		ready(ln.Addr().String())
	}
	// The back workers outlive ctx until HTTP has drained, so that the last purchases are relayed.
	backCtx, stopBack := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBack()
	back := start(backCtx, p.back, errs)

	var runErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case err := <-serveErr:
		runErr = fmt.Errorf("http server: %w", err)
	case err := <-errs:
		runErr = err
	}
	// The listener first (drain.go says why), then unready: once /readyz answers 503 no new
	// connection is taken.
	if err := ln.Close(); err != nil {
		log.Warn("close listener", "err", err)
	}
	drain.begin()
	stopFront()
	front.Wait()
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.HTTP.ShutdownTimeout)
	defer cancel()
	drain.wait(shutdownCtx, drainQuiet, min(drainLimit, cfg.HTTP.ShutdownTimeout/2))
	log.Info("draining: listener closed, waiting for the requests in flight")
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn("http shutdown", "err", err)
	}
	stopBack()
	back.Wait()
	log.Info("stopped")
	return runErr
}

// start runs each worker in a goroutine of its own, sending the error of any that fails to errs.
func start(ctx context.Context, workers []worker, errs chan<- error) *sync.WaitGroup {
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Go(func() {
			if err := w(ctx); err != nil {
				errs <- err
			}
		})
	}
	return &wg
}

// traceParent is the sale service's TraceParent: the tracing's while it is on, nil (nothing to
// call per purchase) while it is off.
func (r *resources) traceParent() func(context.Context) string {
	if !r.tracing.Enabled() {
		return nil
	}
	return r.tracing.TraceParent
}
