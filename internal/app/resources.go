package app

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/config"
	"github.com/seckill-go/seckill-go/internal/lock/memlock"
	"github.com/seckill-go/seckill-go/internal/lock/mysqllock"
	"github.com/seckill-go/seckill-go/internal/lock/redislock"
	"github.com/seckill-go/seckill-go/internal/lock/redisnaive"
	"github.com/seckill-go/seckill-go/internal/lock/redisreentrant"
	"github.com/seckill-go/seckill-go/internal/lock/redlock"
	"github.com/seckill-go/seckill-go/internal/lock/tokens"
	"github.com/seckill-go/seckill-go/internal/lock/zklock"
	"github.com/seckill-go/seckill-go/internal/metrics"
	"github.com/seckill-go/seckill-go/internal/orderqueue"
	"github.com/seckill-go/seckill-go/internal/redisconn"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/stock"
	"github.com/seckill-go/seckill-go/internal/stock/redislua"
	"github.com/seckill-go/seckill-go/internal/store"
	"github.com/seckill-go/seckill-go/internal/tracing"
)

// resources are the process's connections to the services it runs on, opened in one place
// (openResources) and closed by one Close, in reverse order of opening. What the parts built on
// them need closing (the Kafka writer, the combiners) is registered with onClose too, so that it
// closes before what it uses.
type resources struct {
	log *slog.Logger
	cfg *config.Config

	store *store.Store
	// rdb serves the locks and the change feed; liveRDB the storefront's live figures, a small
	// pool with short timeouts of its own, so that a stampede's counters never compete with the
	// locks for connections, and a slow Redis costs the stats a moment, not the default 5 s.
	rdb, liveRDB redis.UniversalClient
	redisLocks   *redislock.Client
	zk           *zklock.Client
	// lockTable and naiveLockTable are the lock tables of mysql-lock-table and its naive variant,
	// on the store's pool (see openLockTables).
	lockTable, naiveLockTable *mysqllock.Client
	// fenceTokens count the fencing tokens of the zoo's locks that have none of their own
	// (redlock, memcached), in the main Redis.
	fenceTokens *tokens.Redis
	// memcache is the memcached strategy's client; redlockServers the redlock strategy's, one
	// per independent Redis server.
	memcache       *memcache.Client
	redlockServers []redis.UniversalClient
	// luaSales are the redis-lua sales in Redis; persister moves their accepted purchases to
	// MySQL (nil when this process runs none).
	luaSales  *redislua.Sale
	persister *redislua.Persister
	kafka     orderqueue.KafkaConfig
	metrics   *metrics.Metrics
	// strategies are the served strategies' own objects (before any combining), made once: the
	// deductors and the returners are both read from them.
	strategies map[sale.Strategy]any
	// fp are the test failpoints this process was started with.
	fp failpoints
	// tracing is the process's tracing; nil when it is off, and then nothing is instrumented.
	tracing *tracing.Tracing

	closers []func()
}

// openResources opens every resource, or none: on an error it closes what it had opened. The
// persister gets its test failpoints from fp.
func openResources(ctx context.Context, log *slog.Logger, cfg *config.Config, tr *tracing.Tracing, fp failpoints) (_ *resources, err error) {
	r := &resources{log: log, cfg: cfg, fp: fp, tracing: tr}
	defer func() {
		if err != nil {
			r.Close()
		}
	}()
	if r.store, err = openStore(ctx, log, cfg, tr); err != nil {
		return nil, err
	}
	r.onClose(func() { r.store.Close() })
	if err := r.openLockTables(ctx); err != nil {
		return nil, err
	}

	if err := r.openRedis(); err != nil {
		return nil, err
	}
	if r.redisLocks, err = redislock.New(r.rdb, redislock.Options{TTL: cfg.Sale.LockTTL, Logger: log.With("component", "redislock")}); err != nil {
		return nil, err
	}
	r.onClose(r.redisLocks.Close)
	if r.fenceTokens, err = tokens.NewRedis(r.rdb, ""); err != nil {
		return nil, err
	}
	r.openZooLocks()
	if r.luaSales, err = redislua.New(r.rdb, cfg.DatabaseName()); err != nil {
		return nil, err
	}
	if cfg.Run.Persister {
		var trace func(context.Context, []sale.Reservation) (context.Context, func(error))
		if tr.Enabled() {
			trace = tr.Persisting
		}
		r.persister, err = redislua.NewPersister(r.rdb, r.luaSales, r.store, redislua.PersisterOptions{
			Consumer:     cfg.InstanceID,
			ClaimAfter:   cfg.Persist.ClaimAfter,
			Linger:       cfg.Persist.Linger,
			Burst:        cfg.Persist.Burst,
			MaxLag:       cfg.Persist.MaxLag,
			Log:          log.With("component", "persister"),
			BeforeCommit: fp.persisterBeforeCommit,
			AfterCommit:  fp.persisterAfterCommit,
			// r.metrics is made last of the resources, before the persister runs.
			OnParked: func(n int) { r.metrics.PoisonRows("persister", n) },
			Trace:    trace,
		})
		if err != nil {
			return nil, err
		}
	}

	r.zk, err = zklock.Connect(ctx, cfg.ZK.Servers, zklock.Options{
		SessionTimeout: cfg.ZK.SessionTimeout,
		Logger:         log, // zklock names itself (component=zklock)
	})
	if err != nil {
		return nil, fmt.Errorf("zookeeper: %w", err)
	}
	r.onClose(r.zk.Close)

	r.openKafka(ctx)
	r.metrics = metrics.New()
	r.metrics.CollectStock(r.store)
	r.metrics.CollectDB(r.store.DB(), "seckill")
	if r.persister != nil {
		r.metrics.CountRedisLuaRefused(r.persister.Refused)
	}
	return r, nil
}

// openRedis makes the two Redis clients: rdb, for the locks and the change feed, and liveRDB,
// for the storefront's live figures. Neither dials before its first use. With tracing on, rdb's
// commands are traced (the locks, redis-lua's scripts); liveRDB's counters never are.
func (r *resources) openRedis() error {
	cfg := r.cfg
	redisconn.SetLogger(r.log)
	// One dial attempt and one retry per call: go-redis's defaults (5 dials, 3 retries) spent
	// 1.7 s on the call that found a stopped Redis, and the lock fails fast only from then on.
	r.rdb = redisconn.Open(cfg.Redis.Topology, redis.UniversalOptions{
		DialTimeout: time.Second, DialerRetries: 1, MaxRetries: 1,
	})
	r.onClose(func() { r.rdb.Close() })
	r.liveRDB = redisconn.Open(cfg.Redis.Topology, redis.UniversalOptions{
		PoolSize: cfg.Live.RedisPool, PipelinePoolSize: 2, MaxRetries: -1, DialerRetries: 1,
		DialTimeout: 2 * cfg.Live.RedisTimeout, ReadTimeout: cfg.Live.RedisTimeout, WriteTimeout: cfg.Live.RedisTimeout,
		ContextTimeoutEnabled: true,
	})
	r.onClose(func() { r.liveRDB.Close() })
	if r.tracing.Enabled() {
		r.tracing.InstrumentRedis(r.rdb)
	}
	return nil
}

// openKafka records where the orders and their lifecycle events go, and creates both topics if
// they are missing. A broker that is away does not stop the start: the relay retries and /readyz
// reports the broker until it is back.
func (r *resources) openKafka(ctx context.Context) {
	cfg := r.cfg
	r.kafka = orderqueue.KafkaConfig{
		Brokers:    cfg.Kafka.Brokers,
		Topic:      cfg.Kafka.Topic,
		GroupID:    cfg.Kafka.GroupID,
		Partitions: cfg.Kafka.Partitions,
	}
	for _, t := range []orderqueue.KafkaConfig{r.kafka, r.kafka.Lifecycle()} {
		if err := orderqueue.EnsureTopic(ctx, t); err != nil {
			r.log.Warn("could not ensure the Kafka topic; continuing", "topic", t.Topic, "err", err)
		}
	}
}

func (r *resources) onClose(f func()) { r.closers = append(r.closers, f) }

// openZooLocks makes the clients of the zoo's own lock servers (SECKILL_MEMCACHED_ADDR,
// SECKILL_REDLOCK_ADDRS). Neither dials before its first use, and nothing but their strategies
// needs them: a purchase of such a product gets 503 while they are away, and /readyz does not
// ask after them.
func (r *resources) openZooLocks() {
	r.memcache = memcache.New(r.cfg.ZooLocks.MemcachedAddr)
	r.memcache.Timeout = time.Second
	r.memcache.MaxIdleConns = 16
	r.onClose(func() { _ = r.memcache.Close() })
	for _, addr := range r.cfg.ZooLocks.RedlockAddrs {
		// No retries and one dial: a dead server must cost one server call (redlock's
		// ServerTimeout), not go-redis's redials; the call's context bounds a slow reply.
		rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1,
			DialTimeout: time.Second, ContextTimeoutEnabled: true, PoolSize: 16})
		r.onClose(func() { _ = rdb.Close() })
		r.redlockServers = append(r.redlockServers, rdb)
	}
}

// naiveLockTableName keeps the naive lock's rows apart from the shipped lock's: a dead naive
// holder's row never expires, and would block the product's lock for good if the product were
// switched to mysql-lock-table under the same lock name.
const naiveLockTableName = "lock_table_naive"

// openLockTables makes the lock-table clients and creates their tables if they are missing. The
// tables are the lock library's, made by it on every start (idempotent, whatever
// SECKILL_AUTO_MIGRATE says) rather than by a migration: their layout is the library's private
// business, usable without this program's schema, and their rows live for one critical section,
// with nothing to migrate. The database user needs the CREATE privilege for it.
func (r *resources) openLockTables(ctx context.Context) error {
	open := func(st sale.Strategy, naive bool) (*mysqllock.Client, error) {
		opts := mysqllock.Options{
			TTL:   r.cfg.Sale.LockTTL,
			Naive: naive,
			// r.metrics is made last of the resources, before any strategy takes a lock.
			OnAttempt: func(won bool) { r.metrics.LockAttempt(st, won) },
			Logger:    r.log.With("component", "mysqllock", "strategy", st),
		}
		if naive {
			opts.Table = naiveLockTableName
		}
		c, err := mysqllock.New(r.store.DB(), opts)
		if err != nil {
			return nil, err
		}
		return c, c.EnsureTable(ctx)
	}
	var err error
	if r.lockTable, err = open(sale.StrategyMySQLLockTable, false); err != nil {
		return err
	}
	r.naiveLockTable, err = open(sale.StrategyMySQLLockTableNaive, true)
	return err
}

// Close closes everything opened or registered, last first.
func (r *resources) Close() {
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
	r.closers = nil
}

func openStore(ctx context.Context, log *slog.Logger, cfg *config.Config, tr *tracing.Tracing) (*store.Store, error) {
	if cfg.AutoMigrate {
		if err := store.CreateDatabase(ctx, cfg.MySQL.DSN); err != nil {
			return nil, err
		}
	}
	o := store.Options{MaxOpenConns: cfg.MySQL.MaxOpenConns, PaymentWindow: cfg.Payment.Window}
	if tr.Enabled() {
		o.Tracer, o.TraceEvents = tr.ClientProvider(), tr.Lifecycle
	}
	st, err := store.Open(ctx, log.With("component", "store"), cfg.MySQL.DSN, o)
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

// strategyDef is one strategy the program knows and how its deductor is made: either a batch
// deductor, whose purchases are combined (sale.Combiner), or a single one, which never is.
type strategyDef struct {
	strategy sale.Strategy
	batch    func(r *resources) (sale.BatchDeductor, error)
	single   func(r *resources) (sale.Deductor, error)
}

// strategyTable is every strategy, in sale.Strategies order: what the deductors, the seed's demo
// sales and the start-up log all read.
var strategyTable = []strategyDef{
	{strategy: sale.StrategyMySQL, batch: func(r *resources) (sale.BatchDeductor, error) {
		return stock.NewMySQL(r.store)
	}},
	{strategy: sale.StrategyRedis, batch: func(r *resources) (sale.BatchDeductor, error) {
		return r.locked(stock.LockedOptions{Strategy: sale.StrategyRedis, Locker: r.redisLocks.Locker()})
	}},
	{strategy: sale.StrategyZK, batch: func(r *resources) (sale.BatchDeductor, error) {
		return r.locked(stock.LockedOptions{Strategy: sale.StrategyZK, Locker: r.zk.Mutex(r.zkCounted(sale.StrategyZK, false)).Locker()})
	}},
	// One script run decides a batch: one Redis round trip for the purchases that queued up.
	{strategy: sale.StrategyRedisLua, batch: func(r *resources) (sale.BatchDeductor, error) {
		var wake func(int64, int)
		if r.persister != nil {
			wake = r.persister.Wake
		}
		d, err := redislua.NewDeductor(r.rdb, r.luaSales, r.store.ReloadSale, wake)
		if err != nil {
			return nil, err
		}
		d.SetReturned(r.store.ReturnedOrders) // a rebuilt state must know the orders returned already
		if err := d.SetReplication(redislua.Replication{MinReplicas: r.cfg.RedisLua.MinReplicas, Timeout: r.cfg.RedisLua.WaitTimeout}); err != nil {
			return nil, err
		}
		return d, nil
	}},
	// The row lock of SELECT … FOR UPDATE, waited for at most the lock wait.
	{strategy: sale.StrategyMySQLForUpdate, batch: func(r *resources) (sale.BatchDeductor, error) {
		return stock.NewForUpdate(r.store, r.cfg.Sale.LockWait, r.metrics)
	}},
	// Versioned writes, tried again until the lock wait is spent.
	{strategy: sale.StrategyMySQLVersion, batch: func(r *resources) (sale.BatchDeductor, error) {
		return stock.NewOptimistic(r.store, r.cfg.Sale.LockWait, r.metrics)
	}},
	{strategy: sale.StrategyMySQLLockTable, batch: func(r *resources) (sale.BatchDeductor, error) {
		return r.locked(stock.LockedOptions{Strategy: sale.StrategyMySQLLockTable, Locker: r.lockTable.Locker()})
	}},
	// The zk lock's session, with the naive wait: every waiter watches every lock node.
	{strategy: sale.StrategyZKHerd, batch: func(r *resources) (sale.BatchDeductor, error) {
		return r.locked(stock.LockedOptions{Strategy: sale.StrategyZKHerd, Locker: r.zk.Mutex(r.zkCounted(sale.StrategyZKHerd, true)).Locker()})
	}},
	// A batch and its write step each take the lock, for one owner: the write step re-enters.
	{strategy: sale.StrategyZKReentrant, batch: func(r *resources) (sale.BatchDeductor, error) {
		return r.locked(stock.LockedOptions{Strategy: sale.StrategyZKReentrant, Locker: r.zk.Reentrant(r.zkCounted(sale.StrategyZKReentrant, false)).Locker(), Reentrant: true})
	}},
	// mysql-version giving up after three lost writes with a false sold out: undersells. One buyer
	// per try, as in the write-ups: combined, a replica's tries collide only with the other
	// replicas' batches, seldom three times running, and the undersell it is kept to show hides
	// (the zoo's load on three replicas, 400 buyers for 200 units: batched, every unit sold with
	// 1.0 wasted tries per grant; one buyer per try, units left unsold with 7.3).
	{strategy: sale.StrategyMySQLVersionCapped, single: func(r *resources) (sale.Deductor, error) {
		return stock.NewOptimistic(r.store, r.cfg.Sale.LockWait, r.metrics, stock.Capped())
	}},
	// The write-ups' lock table: no expiry, no owner, no fence.
	{strategy: sale.StrategyMySQLLockTableNaive, batch: func(r *resources) (sale.BatchDeductor, error) {
		return r.locked(stock.LockedOptions{Strategy: sale.StrategyMySQLLockTableNaive, Locker: r.naiveLockTable.Locker(), Unfenced: true})
	}},
	// The write-ups' Redis locks, unfenced as they are there: SETNX then EXPIRE, and the
	// timestamp lock with GETSET on this replica's clock (SECKILL_TEST_CLOCK_OFFSET skews it).
	{strategy: sale.StrategyRedisSetnx, batch: func(r *resources) (sale.BatchDeductor, error) {
		l, err := redisnaive.NewSetNX(r.rdb, r.naiveOptions(sale.StrategyRedisSetnx))
		if err != nil {
			return nil, err
		}
		return r.locked(stock.LockedOptions{Strategy: sale.StrategyRedisSetnx, Locker: l.Locker(), Unfenced: true})
	}},
	{strategy: sale.StrategyRedisGetset, batch: func(r *resources) (sale.BatchDeductor, error) {
		l, err := redisnaive.NewGetSet(r.rdb, r.naiveOptions(sale.StrategyRedisGetset))
		if err != nil {
			return nil, err
		}
		return r.locked(stock.LockedOptions{Strategy: sale.StrategyRedisGetset, Locker: l.Locker(), Unfenced: true})
	}},
	// Redisson's RLock: the batch and its write step each take the lock, for one owner; the
	// watchdog renews it every third of SECKILL_LOCK_TTL.
	{strategy: sale.StrategyRedisReentrant, batch: func(r *resources) (sale.BatchDeductor, error) {
		c, err := redisreentrant.New(r.rdb, redisreentrant.Options{
			TTL:       r.cfg.Sale.LockTTL,
			Logger:    r.log.With("component", "redisreentrant"),
			OnAttempt: func(won bool) { r.metrics.LockAttempt(sale.StrategyRedisReentrant, won) },
		})
		if err != nil {
			return nil, err
		}
		return r.locked(stock.LockedOptions{Strategy: sale.StrategyRedisReentrant, Locker: c.Locker(), Reentrant: true})
	}},
	// Redlock over SECKILL_REDLOCK_ADDRS, unfenced as Redlock is: a lease of SECKILL_LOCK_TTL,
	// never renewed.
	{strategy: sale.StrategyRedlock, batch: func(r *resources) (sale.BatchDeductor, error) {
		c, err := redlock.New(r.redlockServers, redlock.Options{
			TTL:       r.cfg.Sale.LockTTL,
			Tokens:    r.fenceTokens,
			OnAttempt: func(won bool) { r.metrics.LockAttempt(sale.StrategyRedlock, won) },
		})
		if err != nil {
			return nil, err
		}
		return r.locked(stock.LockedOptions{Strategy: sale.StrategyRedlock, Locker: c.Locker(), Unfenced: true})
	}},
	// Memcached's add, unfenced as in the write-ups; its item lives at least SECKILL_LOCK_TTL
	// (memcachedTTL).
	{strategy: sale.StrategyMemcached, batch: func(r *resources) (sale.BatchDeductor, error) {
		l, err := memlock.New(r.memcache, memlock.Options{
			TTL:       memcachedTTL(r.cfg.Sale.LockTTL),
			Tokens:    r.fenceTokens,
			OnAttempt: func(won bool) { r.metrics.LockAttempt(sale.StrategyMemcached, won) },
		})
		if err != nil {
			return nil, err
		}
		return r.locked(stock.LockedOptions{Strategy: sale.StrategyMemcached, Locker: l.Locker(), Unfenced: true})
	}},
	// The negative control keeps its textbook one-buyer read-check-write: combined, one replica
	// would serialise it.
	{strategy: sale.StrategyNone, single: func(r *resources) (sale.Deductor, error) {
		return stock.NewNone(r.store)
	}},
}

// locked is a lock strategy (o: its name, locker, and fence and re-entry), over the store, with
// the configured lock wait and the metrics.
func (r *resources) locked(o stock.LockedOptions) (*stock.Locked, error) {
	o.Store, o.Wait, o.Observer = r.store, r.cfg.Sale.LockWait, r.metrics
	if r.tracing.Enabled() {
		o.Locker = r.tracing.Locker(o.Strategy, o.Locker)
	}
	return stock.NewLocked(o)
}

// zkCounted are the options of a ZooKeeper strategy's locks: herd or predecessor watch, with its
// wake-ups and its looks at the queue (won, or a wasted look) counted for the lock zoo.
func (r *resources) zkCounted(st sale.Strategy, herd bool) zklock.MutexOptions {
	return zklock.MutexOptions{
		Herd:   herd,
		OnWake: func() { r.metrics.LockWakeups(st, 1) },
		OnLook: func(won bool) { r.metrics.LockAttempt(st, won) },
	}
}

// naiveOptions are the options of redis-setnx's and redis-getset's locks: the lease of
// SECKILL_LOCK_TTL, never renewed, their tries counted for the lock zoo. The holder-kill
// failpoint fires first between SETNX and EXPIRE, where the write-ups' holder dies.
func (r *resources) naiveOptions(st sale.Strategy) redisnaive.Options {
	o := redisnaive.Options{
		TTL:         r.cfg.Sale.LockTTL,
		ClockOffset: r.cfg.Test.ClockOffset,
		OnAttempt:   func(won bool) { r.metrics.LockAttempt(st, won) },
	}
	if kill := r.fp.holderKill; kill != nil && st == sale.StrategyRedisSetnx {
		o.BetweenSetnxAndExpire = func() bool { kill(string(st)); return true }
	}
	return o
}

// memcachedTTL is the expiry of the memcached strategy's items for a lease of ttl: memcached
// expires in whole seconds on a clock that ticks once a second, so an item of n seconds lives
// between n-1 and n; one second more than ttl, rounded up, keeps the lock at least ttl.
func memcachedTTL(ttl time.Duration) time.Duration {
	return (ttl + time.Second - 1).Truncate(time.Second) + time.Second
}

// servedStrategies lists, in sale.Catalog order, the strategies this configuration serves. The
// seed makes its demo sales in this order, and the storefront shows them by id: a strategy added
// out of place in strategyTable must not reorder the cards.
func servedStrategies(cfg *config.Config) []sale.Strategy {
	var out []sale.Strategy
	for _, d := range strategyTable {
		if d.strategy.Safe() || cfg.Sale.AllowUnsafe { // the unsafe ones only when allowed
			out = append(out, d.strategy)
		}
	}
	slices.SortStableFunc(out, func(a, b sale.Strategy) int {
		return slices.Index(sale.Strategies, a) - slices.Index(sale.Strategies, b)
	})
	return out
}

// batchTxTimeout bounds a batch's transaction (its retries on deadlock included).
const batchTxTimeout = 10 * time.Second

// deductors returns one Deductor per served strategy. The batch ones combine the purchases of a
// product that queue up while one of its deductions runs (SECKILL_BATCH_*); their combiners are
// closed with the resources, deciding what is still queued.
func (r *resources) deductors() (map[sale.Strategy]sale.Deductor, error) {
	made, err := r.madeStrategies()
	if err != nil {
		return nil, err
	}
	out := map[sale.Strategy]sale.Deductor{}
	for _, d := range strategyTable {
		m, ok := made[d.strategy]
		if !ok {
			continue
		}
		b, batch := m.(sale.BatchDeductor)
		if d.single != nil || !batch {
			out[d.strategy] = m.(sale.Deductor)
			if r.tracing.Enabled() {
				out[d.strategy] = r.tracing.Deductor(d.strategy, m.(sale.Deductor))
			}
			continue
		}
		traced := b
		if r.tracing.Enabled() {
			traced = r.tracing.BatchDeductor(d.strategy, b)
		}
		c, err := sale.NewCombiner(traced, sale.CombinerOptions{
			Max:      r.cfg.Sale.BatchMax,
			Inflight: r.cfg.Sale.BatchInflight,
			Linger:   r.cfg.Sale.BatchLinger,
			// A batch waits for its lock (SECKILL_LOCK_WAIT), then runs one transaction.
			Timeout: r.cfg.Sale.LockWait + batchTxTimeout,
			Observe: r.metrics.BatchObserver(d.strategy),
		})
		if err != nil {
			return nil, err
		}
		r.onClose(c.Close)
		out[d.strategy] = c
		if k, ok := b.(keeperPreparer); ok {
			out[d.strategy] = combinedKeeper{c, k}
		}
	}
	return out, nil
}

// madeStrategies makes, once, the object of every strategy this configuration serves.
func (r *resources) madeStrategies() (map[sale.Strategy]any, error) {
	if r.strategies != nil {
		return r.strategies, nil
	}
	made := map[sale.Strategy]any{}
	for _, d := range strategyTable {
		if !d.strategy.Safe() && !r.cfg.Sale.AllowUnsafe {
			continue
		}
		var (
			m   any
			err error
		)
		if d.single != nil {
			m, err = d.single(r)
		} else {
			m, err = d.batch(r)
		}
		if err != nil {
			return nil, err
		}
		if h, ok := m.(holdSetter); ok && r.fp.holder() != nil {
			hold, st := r.fp.holder(), string(d.strategy)
			h.SetHold(func(context.Context) { hold(st) })
		}
		made[d.strategy] = m
	}
	r.strategies = made
	return made, nil
}

// returners returns the Returner of every served strategy that has one (returning units is a
// strategy operation: see sale.Returner).
func (r *resources) returners() (map[sale.Strategy]sale.Returner, error) {
	made, err := r.madeStrategies()
	if err != nil {
		return nil, err
	}
	out := map[sale.Strategy]sale.Returner{}
	for st, m := range made {
		if rt, ok := m.(sale.Returner); ok {
			out[st] = rt
		}
	}
	return out, nil
}

// holdSetter is a lock strategy whose critical section can run a test hook (the holder-*
// failpoints).
type holdSetter interface {
	SetHold(func(ctx context.Context))
}

// keeperPreparer is a strategy that keeps receipts and prepares sales itself (redis-lua).
type keeperPreparer interface {
	sale.ReceiptKeeper
	sale.Preparer
}

// combinedKeeper is such a strategy behind its Combiner: the purchases combined, the receipts
// and the preparing still its own.
type combinedKeeper struct {
	sale.Deductor
	keeperPreparer
}
