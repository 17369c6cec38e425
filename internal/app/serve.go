package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/changefeed"
	"github.com/seckill-go/seckill-go/internal/config"
	"github.com/seckill-go/seckill-go/internal/httpapi"
	"github.com/seckill-go/seckill-go/internal/livestats"
	"github.com/seckill-go/seckill-go/internal/lock"
	"github.com/seckill-go/seckill-go/internal/lock/redislock"
	"github.com/seckill-go/seckill-go/internal/lock/zklock"
	"github.com/seckill-go/seckill-go/internal/metrics"
	"github.com/seckill-go/seckill-go/internal/order"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/stampede"
	"github.com/seckill-go/seckill-go/internal/stock"
	"github.com/seckill-go/seckill-go/internal/store"
	"github.com/seckill-go/seckill-go/web"
)

// serve wires the process together, runs it until ctx ends, and shuts it down in reverse order
// of construction: a running stampede first (it would send purchases to a closing server), HTTP
// (in-flight purchases finish), then the relay, the consumer and the live counters' last flush,
// the Kafka writer, ZooKeeper (closing the session drops any lock node left), Redis and the
// database.
func serve(ctx context.Context, log *slog.Logger, cfg *config.Config, opts Options) error {
	startCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()

	st, err := openStore(startCtx, log, cfg)
	if err != nil {
		return err
	}
	defer st.Close()

	rdb := redis.NewClient(&redis.Options{Addr: cfg.Redis.Addr, Password: cfg.Redis.Password})
	defer rdb.Close()
	redisLocks, err := redislock.New(rdb, redislock.Options{TTL: cfg.Sale.LockTTL, Logger: log.With("component", "redislock")})
	if err != nil {
		return err
	}
	defer redisLocks.Close()

	zkLocks, err := zklock.Connect(startCtx, cfg.ZK.Servers, zklock.Options{
		SessionTimeout: cfg.ZK.SessionTimeout,
		Logger:         log.With("component", "zklock"),
	})
	if err != nil {
		return fmt.Errorf("zookeeper: %w", err)
	}
	defer zkLocks.Close()

	kcfg := order.KafkaConfig{
		Brokers:    cfg.Kafka.Brokers,
		Topic:      cfg.Kafka.Topic,
		GroupID:    cfg.Kafka.GroupID,
		Partitions: cfg.Kafka.Partitions,
	}
	if err := order.EnsureTopic(startCtx, kcfg); err != nil {
		// Not fatal: the relay retries and /readyz reports the broker until it is back.
		log.Warn("could not ensure the Kafka topic; continuing", "topic", kcfg.Topic, "err", err)
	}
	m := metrics.New()
	m.CollectStock(st)

	var workers []func(context.Context) error
	var writer interface{ Close() error }
	wake := func() {}
	if cfg.Run.Relay {
		w := order.NewWriter(log, kcfg)
		writer = w
		relay, err := order.NewRelay(log.With("component", "relay"), st, w, m, order.RelayConfig{Owner: cfg.InstanceID})
		if err != nil {
			return err
		}
		wake = relay.Wake
		workers = append(workers, relay.Run)
	}
	if cfg.Run.Consumer {
		c, err := order.NewConsumer(log.With("component", "consumer"), kcfg, st, m)
		if err != nil {
			return err
		}
		workers = append(workers, c.Run)
	}

	// Listen before building the API: a stampede sends its buyers to this replica's own address
	// when no peers are configured, and with port 0 that address is known only now.
	ln := opts.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", cfg.HTTP.Addr); err != nil {
			return fmt.Errorf("listen %s: %w", cfg.HTTP.Addr, err)
		}
	}
	defer ln.Close()

	locks := lockers{redis: redisLocks.Locker(), zk: zkLocks.Locker()}
	a, err := newAPI(log, cfg, ln.Addr(), st, rdb, zkLocks, locks, kcfg, m, wake)
	if a.close != nil {
		defer a.close()
	}
	if err != nil {
		return err
	}
	workers = append(workers, a.workers...)
	if cfg.HTTP.PprofAddr != "" {
		w, err := pprofWorker(log, cfg.HTTP.PprofAddr)
		if err != nil {
			return err
		}
		workers = append(workers, w)
	}
	return runProcess(ctx, log, cfg, ln, a.handler, a.frontWorkers, workers, writer, opts.Ready)
}

func openStore(ctx context.Context, log *slog.Logger, cfg *config.Config) (*store.Store, error) {
	if cfg.AutoMigrate {
		if err := store.CreateDatabase(ctx, cfg.MySQL.DSN); err != nil {
			return nil, err
		}
	}
	st, err := store.Open(ctx, log.With("component", "store"), cfg.MySQL.DSN, store.Options{MaxOpenConns: cfg.MySQL.MaxOpenConns})
	if err != nil {
		return nil, err
	}
	if cfg.AutoMigrate {
		if err := store.Migrate(ctx, log, st.DB()); err != nil {
			st.Close()
			return nil, err
		}
	}
	return st, nil
}

// api is the HTTP face of the process and what runs beside it.
type api struct {
	handler http.Handler
	// frontWorkers stop when shutdown begins, before HTTP drains (the stampede runner: it must not
	// send new purchases to a server that is closing); workers stop after it (the live counters'
	// flusher: it records the last purchases).
	frontWorkers []func(context.Context) error
	workers      []func(context.Context) error
	close        func()
}

// newAPI builds the sale service and the HTTP API over it (or only the ops endpoints for a
// worker), with the storefront's live counters and stampede runner.
func newAPI(log *slog.Logger, cfg *config.Config, self net.Addr, st *store.Store, rdb *redis.Client, zkLocks *zklock.Client,
	locks lockers, kcfg order.KafkaConfig, m *metrics.Metrics, wake func()) (api, error) {
	checks := map[string]httpapi.Check{
		"mysql":     st.Ping,
		"redis":     func(ctx context.Context) error { return rdb.Ping(ctx).Err() },
		"zookeeper": zkLocks.Ping,
		"kafka":     func(ctx context.Context) error { return order.Ping(ctx, kcfg) },
	}
	apiCfg := httpapi.Config{
		AdminToken:           cfg.AdminToken,
		PerUserRate:          cfg.Limits.PerUserRate,
		PerUserBurst:         cfg.Limits.PerUserBurst,
		MaxInflightPurchases: cfg.Limits.MaxInflight,
		Ready:                checks,
		Metrics:              m.Handler(),
		Web:                  web.FS(),
		OpsOnly:              !cfg.Run.API,
	}
	deps := httpapi.Deps{Log: log, HTTPMetrics: m}
	var out api
	if cfg.Run.API {
		deductors, combiners, err := newDeductors(cfg, st, locks, m)
		if err != nil {
			return api{}, err
		}
		// The combiners decide what is queued once HTTP has drained, then stop.
		out.workers = append(out.workers, func(ctx context.Context) error {
			<-ctx.Done()
			for _, c := range combiners {
				c.Close()
			}
			return nil
		})
		// The live figures get a small Redis pool of their own with short timeouts: a stampede's
		// counters never compete with the locks for connections, and a slow Redis costs the stats
		// 300 ms, not the default 5 s.
		liveRDB := redis.NewClient(&redis.Options{
			Addr: cfg.Redis.Addr, Password: cfg.Redis.Password,
			PoolSize: 8, PipelinePoolSize: 2, MaxRetries: -1, DialerRetries: 1,
			DialTimeout: time.Second, ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond,
			ContextTimeoutEnabled: true,
		})
		out.close = func() { liveRDB.Close() }
		live, err := livestats.NewRecorder(log.With("component", "livestats"), liveRDB, livestats.Options{
			Namespace: cfg.DatabaseName(),
			Metrics:   m.RegisterLiveStats(),
		})
		if err != nil {
			return out, err
		}
		board, err := livestats.NewBoard(liveRDB, 0)
		if err != nil {
			return out, err
		}
		targets := cfg.Stampede.Peers
		if len(targets) == 0 {
			targets = []string{selfURL(self)}
		}
		runner, err := stampede.New(log.With("component", "stampede"), stampede.Options{
			Targets:   targets,
			MaxBuyers: cfg.Stampede.MaxBuyers,
			Board:     board,
		})
		if err != nil {
			return out, err
		}
		feed, err := changefeed.New(log.With("component", "changefeed"), rdb, cfg.DatabaseName())
		if err != nil {
			return out, err
		}
		svc, err := sale.NewService(sale.Options{
			Store:           st,
			Deductors:       deductors,
			DefaultStrategy: cfg.Sale.DefaultStrategy,
			NewOrderID:      newOrderID,
			Observer:        m,
			ProductObserver: live,
			Feed:            feed,
			Refresh:         cfg.Sale.Refresh,
			Log:             log.With("component", "sale"),
			OnReserve:       wake,
		})
		if err != nil {
			return out, err
		}
		deps.Sales, deps.Stampedes, deps.Live = svc, runner, live
		out.frontWorkers = append(out.frontWorkers, runner.Run)
		out.workers = append(out.workers, live.Run, svc.Run,
			func(ctx context.Context) error { return feed.Run(ctx, svc.ApplyChange) })
	}
	h, err := httpapi.New(deps, apiCfg)
	if err != nil {
		return out, err
	}
	out.handler = h
	return out, nil
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

// lockers are the distributed locks the lock strategies deduct under.
type lockers struct{ redis, zk lock.Locker }

// newDeductors returns one Deductor per strategy served by this process, and the combiners among
// them (to close at shutdown). The safe strategies combine the purchases of a product that queue
// up while one of its deductions runs (SECKILL_BATCH_MAX, SECKILL_BATCH_LINGER); `none`, the
// negative control, keeps its textbook one-buyer read-check-write.
func newDeductors(cfg *config.Config, st *store.Store, locks lockers, m *metrics.Metrics) (map[sale.Strategy]sale.Deductor, []*sale.Combiner, error) {
	batchers := map[sale.Strategy]sale.BatchDeductor{}
	mysqlD, err := stock.NewMySQL(st)
	if err != nil {
		return nil, nil, err
	}
	batchers[sale.StrategyMySQL] = mysqlD
	for strategy, locker := range map[sale.Strategy]lock.Locker{sale.StrategyRedis: locks.redis, sale.StrategyZK: locks.zk} {
		d, err := stock.NewLocked(st, strategy, locker, cfg.Sale.LockWait, m)
		if err != nil {
			return nil, nil, err
		}
		batchers[strategy] = d
	}
	ds := map[sale.Strategy]sale.Deductor{}
	var combiners []*sale.Combiner
	for strategy, b := range batchers {
		c, err := sale.NewCombiner(b, sale.CombinerOptions{
			Max:      cfg.Sale.BatchMax,
			Inflight: cfg.Sale.BatchInflight,
			Linger:   cfg.Sale.BatchLinger,
			// A batch waits for its lock (SECKILL_LOCK_WAIT), then runs one transaction.
			Timeout: cfg.Sale.LockWait + batchTxTimeout,
			Observe: m.BatchObserver(strategy),
		})
		if err != nil {
			return nil, nil, err
		}
		ds[strategy] = c
		combiners = append(combiners, c)
	}
	if cfg.Sale.AllowUnsafe {
		none, err := stock.NewNone(st)
		if err != nil {
			return nil, nil, err
		}
		ds[sale.StrategyNone] = none
	}
	return ds, combiners, nil
}

// batchTxTimeout bounds a batch's transaction (its retries on deadlock included).
const batchTxTimeout = 10 * time.Second

// enabledStrategies lists, in sale.Strategies order, the strategies newDeductors serves.
func enabledStrategies(cfg *config.Config) []sale.Strategy {
	out := []sale.Strategy{sale.StrategyMySQL, sale.StrategyRedis, sale.StrategyZK}
	if cfg.Sale.AllowUnsafe {
		out = append(out, sale.StrategyNone)
	}
	return out
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

// runProcess serves HTTP on ln and runs the background workers until ctx ends or the listener
// fails. frontWorkers stop as soon as shutdown begins; workers only once HTTP has drained.
func runProcess(ctx context.Context, log *slog.Logger, cfg *config.Config, ln net.Listener, handler http.Handler,
	frontWorkers, workers []func(context.Context) error, writer interface{ Close() error }, ready func(string)) error {
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	errs := make(chan error, len(frontWorkers)+len(workers))
	frontCtx, stopFront := context.WithCancel(ctx)
	defer stopFront()
	var front sync.WaitGroup
	for _, w := range frontWorkers {
		front.Go(func() {
			if err := w(frontCtx); err != nil {
				errs <- err
			}
		})
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	log.Info("listening", "addr", ln.Addr().String(), "api", cfg.Run.API, "relay", cfg.Run.Relay, "consumer", cfg.Run.Consumer)
	if ready != nil {
		ready(ln.Addr().String())
	}

	// The workers outlive ctx until HTTP has drained, so that the last purchases are relayed.
	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Go(func() {
			if err := w(workCtx); err != nil {
				errs <- err
			}
		})
	}

	var runErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case err := <-serveErr:
		runErr = fmt.Errorf("http server: %w", err)
	case err := <-errs:
		runErr = err
	}
	stopFront()
	front.Wait()
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.HTTP.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn("http shutdown", "err", err)
	}
	stopWork()
	wg.Wait()
	if writer != nil {
		if err := writer.Close(); err != nil {
			log.Warn("kafka writer close", "err", err)
		}
	}
	log.Info("stopped")
	return runErr
}
