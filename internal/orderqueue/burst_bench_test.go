//go:build linux

package orderqueue_test

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/segmentio/kafka-go"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/order"
	"github.com/seckill-go/seckill-go/internal/orderqueue"
	"github.com/seckill-go/seckill-go/internal/store"
)

// BenchmarkOrderPipelineBurst measures whether the order pipeline keeps up with a flash sale and
// what it costs: producers insert reservations at a steady rate for a few seconds, in multi-row
// INSERTs as the combining purchase path does, while three relays and three consumers run (three
// replicas, each with a pool of its own) against the real MariaDB and the dev broker. It reports
// how long after the last insert the last order appeared, the rates, the CPU used per 1,000 orders
// by this process, mariadbd and the broker, the batch sizes and the deadlocks the server saw.
//
//	go test -run '^$' -bench OrderPipelineBurst -benchtime 1x ./internal/order
//
// SECKILL_BURST_ROWS (30000), SECKILL_BURST_SECONDS (5), SECKILL_BURST_PRODUCERS (6),
// SECKILL_BURST_PER_INSERT (20) and SECKILL_BURST_PRODUCTS (3) shape the burst;
// SECKILL_BURST_RELAY_BATCH and SECKILL_BURST_CLAIM_INTERVAL_MS override the relays' defaults;
// SECKILL_BURST_NO_CONSUMERS runs the relays alone.
// The sub-benchmark insert-only runs the producers alone: its CPU is the part that is not the
// pipeline's.
func BenchmarkOrderPipelineBurst(b *testing.B) {
	cfg := burstConfig{
		rows:      envInt("SECKILL_BURST_ROWS", 30000),
		over:      time.Duration(envInt("SECKILL_BURST_SECONDS", 5)) * time.Second,
		producers: envInt("SECKILL_BURST_PRODUCERS", 6),
		perInsert: envInt("SECKILL_BURST_PER_INSERT", 20),
		products:  envInt("SECKILL_BURST_PRODUCTS", 3),
		replicas:  3,
	}
	b.Run("insert-only", func(b *testing.B) {
		for range b.N {
			runBurst(b, cfg, false)
		}
	})
	b.Run("pipeline", func(b *testing.B) {
		for range b.N {
			runBurst(b, cfg, true)
		}
	})
}

type burstConfig struct {
	rows, producers, perInsert, products, replicas int
	over                                           time.Duration
}

func runBurst(b *testing.B, cfg burstConfig, pipeline bool) {
	b.StopTimer()
	// A diagnostic: relays only, to tell their cost from the consumers'; "drained" then means
	// published.
	noConsumers := os.Getenv("SECKILL_BURST_NO_CONSUMERS") != ""
	_, dsn := itest.Store(b)
	kcfg := itest.Topic(b, 6)
	stores := make([]*store.Store, cfg.replicas)
	for i := range stores {
		st, err := store.Open(context.Background(), itest.Logger(), dsn, store.Options{MaxOpenConns: 16})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		stores[i] = st
	}
	db := stores[0].DB()
	products := make([]int64, cfg.products)
	for i := range products {
		products[i] = newProduct(b, stores[0], cfg.rows).ID
	}

	rec := &burstRecorder{}
	wakes := make([]func(), cfg.replicas)
	for i := range wakes {
		wakes[i] = func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	stop := func() { cancel(); wg.Wait() }
	defer stop()
	if pipeline {
		for i, st := range stores {
			w := orderqueue.NewWriter(itest.Logger(), kcfg)
			relay, err := orderqueue.NewRelay(itest.Logger(), &countingOutbox{Outbox: st, rec: rec}, &countingWriter{w, rec}, rec,
				orderqueue.RelayConfig{
					Owner:         fmt.Sprintf("relay-%d", i),
					Batch:         envInt("SECKILL_BURST_RELAY_BATCH", 0),
					ClaimInterval: time.Duration(envInt("SECKILL_BURST_CLAIM_INTERVAL_MS", 0)) * time.Millisecond,
				})
			if err != nil {
				b.Fatal(err)
			}
			consumer, err := orderqueue.NewConsumer(itest.Logger(), kcfg, &countingOrders{OrderStore: st, rec: rec}, rec)
			if err != nil {
				b.Fatal(err)
			}
			wakes[i] = relay.Wake
			wg.Go(func() {
				_ = relay.Run(ctx)
				w.Close()
			})
			if !noConsumers {
				wg.Go(func() { _ = consumer.Run(ctx) })
			}
		}
		// Let the consumers join their group before the clock starts.
		time.Sleep(3 * time.Second)
	}

	deadlocks0 := innodbDeadlocks(b, db)
	status0 := serverStatus(b, db)
	conns := startConnCPU(db)
	cpu0 := cpuNow()
	b.StartTimer()
	start := time.Now()
	lastInsert := produceBurst(b, cfg, stores, products, wakes)
	var drainedAt time.Time
	if pipeline {
		deadline := time.Now().Add(3 * time.Minute)
		for rec.created.Load() < int64(cfg.rows) && (!noConsumers || rec.published.Load() < int64(cfg.rows)) {
			if time.Now().After(deadline) {
				b.Fatalf("not drained after 3 minutes: %d published, %d orders of %d", rec.published.Load(), rec.created.Load(), cfg.rows)
			}
			time.Sleep(2 * time.Millisecond)
		}
		drainedAt = time.Now()
	}
	b.StopTimer()
	cpu1 := cpuNow()
	connCPU := conns.stop()
	deadlocks := innodbDeadlocks(b, db) - deadlocks0
	status := serverStatus(b, db).minus(status0)
	var clean time.Duration
	if pipeline {
		// Orders can all exist while some rows are still unmarked (a mark that failed after the
		// broker acknowledged): they are published again once their claim's lease ends.
		for {
			var n int
			if err := db.QueryRow("SELECT COUNT(*) FROM reservations WHERE published_at IS NULL").Scan(&n); err != nil {
				b.Fatal(err)
			}
			clean = time.Since(lastInsert)
			if n == 0 || clean > time.Minute {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	stop()

	var orders int
	if err := db.QueryRow("SELECT COUNT(*) FROM orders").Scan(&orders); err != nil {
		b.Fatal(err)
	}
	if pipeline && !noConsumers && orders != cfg.rows {
		b.Fatalf("orders = %d, want %d", orders, cfg.rows)
	}

	per1k := func(d time.Duration) float64 { return d.Seconds() * 1000 / float64(cfg.rows) }
	insertFor := lastInsert.Sub(start)
	b.ReportMetric(float64(cfg.rows)/insertFor.Seconds(), "inserted/s")
	b.ReportMetric(per1k(cpu1.self-cpu0.self)*1000, "self-cpu-ms/1k")
	b.ReportMetric(per1k(cpu1.mysqld-cpu0.mysqld)*1000, "mysqld-cpu-ms/1k")
	b.ReportMetric(per1k(connCPU.total)*1000, "mysqld-conn-cpu-ms/1k")
	if os.Getenv("SECKILL_BURST_SQL_PROFILE") != "" {
		classes := slices.SortedFunc(maps.Keys(connCPU.byClass), func(a, b string) int {
			return cmp.Compare(connCPU.byClass[b], connCPU.byClass[a])
		})
		var parts []string
		for _, c := range classes {
			parts = append(parts, fmt.Sprintf("%s %.1f", c, per1k(connCPU.byClass[c])*1000))
		}
		b.Logf("mariadbd ms per 1,000 reservations by statement (sampled): %s", strings.Join(parts, ", "))
	}
	b.ReportMetric(per1k(cpu1.broker-cpu0.broker)*1000, "broker-cpu-ms/1k")
	b.ReportMetric(float64(deadlocks), "deadlocks")
	b.ReportMetric(float64(status["Questions"])*1000/float64(cfg.rows), "statements/1k")
	b.ReportMetric(float64(status["Com_commit"]+status["Com_select"]+status["Com_update"]+status["Com_insert"]+
		status["Com_insert_select"])*1000/float64(cfg.rows), "dml+commit/1k")
	b.Logf("server status deltas: %s", status)
	if !pipeline {
		b.Logf("inserted %d rows in %s", cfg.rows, insertFor.Round(time.Millisecond))
		return
	}
	drain := drainedAt.Sub(lastInsert)
	b.ReportMetric(drain.Seconds(), "drain-s")
	b.ReportMetric(float64(cfg.rows)/rec.lastPublished(drainedAt).Sub(start).Seconds(), "published/s")
	b.ReportMetric(float64(cfg.rows)/drainedAt.Sub(start).Seconds(), "confirmed/s")
	b.ReportMetric(float64(rec.claims.Load()), "claims")
	b.ReportMetric(float64(rec.claimed.Load())/float64(max(1, rec.claims.Load())), "rows/claim")
	b.ReportMetric(float64(rec.batchRows.Load())/float64(max(1, rec.batches.Load())), "rows/consumer-batch")
	b.ReportMetric(clean.Seconds(), "outbox-clean-s")
	b.ReportMetric(float64(rec.written.Load()-int64(cfg.rows)), "republished")
	b.ReportMetric(float64(rec.emptyClaims.Load()), "empty-claims")
	b.Logf("inserted %d rows in %s; drained %s after the last insert; claims %d (%d empty), mark errors %d (%d deadlocks), "+
		"release calls %d, relay failures %d, consumer batches %d; published per second %v; confirmed per second %v",
		cfg.rows, insertFor.Round(time.Millisecond), drain.Round(time.Millisecond), rec.claims.Load(), rec.emptyClaims.Load(),
		rec.markErrors.Load(), rec.markDeadlocks.Load(), rec.releases.Load(), rec.failures.Load(), rec.batches.Load(),
		rec.perSecond(&rec.pubTimes, start), rec.perSecond(&rec.confTimes, start))
}

// produceBurst inserts cfg.rows reservations, cfg.perInsert per transaction, spread evenly over
// cfg.over by cfg.producers goroutines, and returns when the last one committed. Producer i
// belongs to replica i%replicas (its pool, its relay's Wake) and buys product i%products.
func produceBurst(b *testing.B, cfg burstConfig, stores []*store.Store, products []int64, wakes []func()) time.Time {
	inserts := cfg.rows / cfg.perInsert
	interval := cfg.over / time.Duration(inserts)
	start := time.Now()
	var next atomic.Int64
	var last atomic.Int64
	var wg sync.WaitGroup
	for p := range cfg.producers {
		replica := p % len(stores)
		db, wake, product := stores[replica].DB(), wakes[replica], products[p%len(products)]
		wg.Go(func() {
			for {
				k := int(next.Add(1) - 1)
				if k >= inserts {
					return
				}
				time.Sleep(time.Until(start.Add(time.Duration(k) * interval)))
				if err := insertReservations(db, product, k*cfg.perInsert, cfg.perInsert); err != nil {
					b.Error(err)
					return
				}
				now := time.Now().UnixNano()
				for {
					l := last.Load()
					if now <= l || last.CompareAndSwap(l, now) {
						break
					}
				}
				for range cfg.perInsert {
					wake() // the purchase path wakes the relay once per accepted purchase
				}
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	return time.Unix(0, last.Load())
}

// insertReservations is the combined purchase transaction: one conditional stock UPDATE for the
// batch and one multi-row INSERT of its reservations.
func insertReservations(db *sql.DB, product int64, first, n int) error {
	for attempt := 0; ; attempt++ {
		err := insertOnce(db, product, first, n)
		var me *mysql.MySQLError
		if err == nil || attempt == 5 || !errors.As(err, &me) || (me.Number != 1213 && me.Number != 1205) {
			return err
		}
	}
}

func insertOnce(db *sql.DB, product int64, first, n int) error {
	tx, err := db.BeginTx(context.Background(), &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it does nothing
	res, err := tx.Exec("UPDATE products SET stock = stock - ? WHERE id = ? AND stock >= ?", n, product, n)
	if err != nil {
		return err
	}
	if k, _ := res.RowsAffected(); k != 1 {
		return fmt.Errorf("product %d sold out", product)
	}
	var q strings.Builder
	q.WriteString("INSERT INTO reservations (order_id, product_id, user_id, quantity, strategy, created_at) VALUES ")
	args := make([]any, 0, 5*n)
	now := time.Now().UTC()
	for i := range n {
		if i > 0 {
			q.WriteString(",")
		}
		q.WriteString("(?, ?, ?, 1, 'mysql', ?)")
		u := first + i
		args = append(args, fmt.Sprintf("burst-%d-%d", product, u), product, "user-"+strconv.Itoa(u), now)
	}
	if _, err := tx.Exec(q.String(), args...); err != nil {
		return err
	}
	return tx.Commit()
}

// burstRecorder counts what the relays and consumers do; it is their metrics too.
type burstRecorder struct {
	claims, emptyClaims, claimed          atomic.Int64
	markErrors, markDeadlocks, releases   atomic.Int64
	published, created, failures, written atomic.Int64
	batches, batchRows                    atomic.Int64
	mu                                    sync.Mutex
	pubTimes, confTimes                   []stamp
}

type stamp struct {
	at time.Time
	n  int64
}

func (r *burstRecorder) stamp(s *[]stamp, n int64) {
	r.mu.Lock()
	*s = append(*s, stamp{time.Now(), n})
	r.mu.Unlock()
}

// lastPublished returns when the last batch before the given time was marked published.
func (r *burstRecorder) lastPublished(before time.Time) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	var t time.Time
	for _, s := range r.pubTimes {
		if s.at.After(t) && !s.at.After(before) {
			t = s.at
		}
	}
	return t
}

// perSecond buckets the stamps by whole seconds since start.
func (r *burstRecorder) perSecond(s *[]stamp, start time.Time) []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int64
	for _, st := range *s {
		i := int(st.at.Sub(start) / time.Second)
		for len(out) <= i {
			out = append(out, 0)
		}
		out[i] += st.n
	}
	return out
}

func (r *burstRecorder) RelayPublished(n int) {
	r.published.Add(int64(n))
	r.stamp(&r.pubTimes, int64(n))
}
func (r *burstRecorder) RelayFailed()           { r.failures.Add(1) }
func (r *burstRecorder) RelayRequeued(int64)    {}
func (r *burstRecorder) SetOutboxBacklog(int64) {}
func (r *burstRecorder) OrdersCreated(int64)    {}
func (r *burstRecorder) ConsumerBatch(size int) { r.batches.Add(1); r.batchRows.Add(int64(size)) }
func (r *burstRecorder) ConsumerMalformed()     {}
func (r *burstRecorder) ConsumerParked(int)     {}
func (r *burstRecorder) RelayParked(int)        {}
func (r *burstRecorder) SetConsumerLag(n int64) {}

type countingOutbox struct {
	orderqueue.Outbox
	rec *burstRecorder
}

func (c *countingOutbox) ClaimOutboxFrom(ctx context.Context, owner string, lease time.Duration, limit int, from int64) ([]order.OutboxEntry, error) {
	e, err := c.Outbox.ClaimOutboxFrom(ctx, owner, lease, limit, from)
	c.rec.claims.Add(1)
	c.rec.claimed.Add(int64(len(e)))
	if len(e) == 0 {
		c.rec.emptyClaims.Add(1)
	}
	return e, err
}

func (c *countingOutbox) MarkPublished(ctx context.Context, ids []int64) error {
	err := c.Outbox.MarkPublished(ctx, ids)
	if err != nil {
		c.rec.markErrors.Add(1)
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 1213 {
			c.rec.markDeadlocks.Add(1)
		}
	}
	return err
}

func (c *countingOutbox) ReleaseClaims(ctx context.Context, owner string, ids []int64) error {
	c.rec.releases.Add(1)
	return c.Outbox.ReleaseClaims(ctx, owner, ids)
}

type countingWriter struct {
	orderqueue.MessageWriter
	rec *burstRecorder
}

func (c *countingWriter) WriteMessages(ctx context.Context, msgs ...kafka.Message) error {
	err := c.MessageWriter.WriteMessages(ctx, msgs...)
	if err == nil {
		c.rec.written.Add(int64(len(msgs)))
	}
	return err
}

type countingOrders struct {
	orderqueue.OrderStore
	rec *burstRecorder
}

func (c *countingOrders) ConfirmOrders(ctx context.Context, ids []string) (int64, error) {
	n, err := c.OrderStore.ConfirmOrders(ctx, ids)
	if err == nil {
		c.rec.created.Add(n)
		c.rec.stamp(&c.rec.confTimes, n)
	}
	return n, err
}

// cpuTimes is the CPU time used so far by this process, mariadbd and the dev broker (zero for a
// process this machine does not run).
type cpuTimes struct{ self, mysqld, broker time.Duration }

func cpuNow() cpuTimes {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return cpuTimes{
		self:   time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
		mysqld: procCPU("mariadbd", "mysqld"),
		broker: procCPU("devbroker"),
	}
}

// connCPU samples the CPU time of the mariadbd threads serving connections to one database (one
// thread per connection), so that the figure leaves out what other tests on the same server cost.
// Work a connection did before its first sample or after its last is missed. With
// SECKILL_BURST_SQL_PROFILE set it samples every 5 ms and charges each interval's run time to the
// kind of statement the connection was running at either end of it (a rough profile: statements
// shorter than the interval are charged to their neighbours or to "between statements").
type connCPU struct {
	stopc chan struct{}
	done  chan connCPUResult
}

type connCPUResult struct {
	total   time.Duration
	byClass map[string]time.Duration
}

func startConnCPU(db *sql.DB) *connCPU {
	c := &connCPU{stopc: make(chan struct{}), done: make(chan connCPUResult, 1)}
	pid := procPID("mariadbd", "mysqld")
	every := 50 * time.Millisecond
	if os.Getenv("SECKILL_BURST_SQL_PROFILE") != "" {
		every = 5 * time.Millisecond
	}
	go func() {
		type key struct{ id, tid int64 }
		type state struct {
			first, last time.Duration
			class       string
		}
		conns := map[key]*state{}
		byClass := map[string]time.Duration{}
		sample := func() {
			rows, err := db.Query(`SELECT ID, TID, COALESCE(INFO, '') FROM information_schema.PROCESSLIST
				WHERE DB = DATABASE() AND ID <> CONNECTION_ID()`)
			if err != nil {
				return
			}
			defer rows.Close()
			for rows.Next() {
				var k key
				var info string
				if rows.Scan(&k.id, &k.tid, &info) != nil {
					continue
				}
				cpu, ok := schedCPU(pid, k.tid)
				if !ok {
					continue
				}
				class := statementClass(info)
				st, seen := conns[k]
				if !seen {
					conns[k] = &state{first: cpu, last: cpu, class: class}
					continue
				}
				charge := class
				if charge == "" {
					charge = st.class
				}
				if charge == "" {
					charge = "between statements"
				}
				byClass[charge] += cpu - st.last
				st.last, st.class = cpu, class
			}
		}
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			sample()
			select {
			case <-c.stopc:
				var total time.Duration
				for _, st := range conns {
					total += st.last - st.first
				}
				c.done <- connCPUResult{total, byClass}
				return
			case <-t.C:
			}
		}
	}()
	return c
}

func (c *connCPU) stop() connCPUResult {
	close(c.stopc)
	return <-c.done
}

// statementClass names the statements of the harness and the pipeline.
func statementClass(info string) string {
	switch {
	case info == "":
		return ""
	case strings.Contains(info, "FOR UPDATE SKIP LOCKED"):
		return "claim SELECT"
	case strings.Contains(info, "SET claim_owner = ?") || strings.Contains(info, "SET claim_owner = '"):
		return "claim UPDATE"
	case strings.Contains(info, "SET published_at = NOW(6)"):
		return "mark published"
	case strings.HasPrefix(info, "INSERT IGNORE INTO orders"):
		return "confirm orders"
	case strings.HasPrefix(info, "INSERT INTO reservations"):
		return "purchase INSERT (harness)"
	case strings.HasPrefix(info, "UPDATE products"):
		return "purchase UPDATE (harness)"
	case strings.Contains(info, "COUNT(*)"):
		return "backlog COUNT"
	case strings.HasPrefix(strings.ToUpper(info), "COMMIT"):
		return "COMMIT"
	}
	return "other: " + strings.Join(strings.Fields(info), " ")[:min(30, len(strings.Join(strings.Fields(info), " ")))]
}

// schedCPU is the run time of one thread of pid, in nanoseconds.
func schedCPU(pid int, tid int64) (time.Duration, bool) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/schedstat", pid, tid))
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(raw))
	if len(f) == 0 {
		return 0, false
	}
	ns, err := strconv.ParseInt(f[0], 10, 64)
	return time.Duration(ns), err == nil
}

func procPID(names ...string) int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		raw, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		s := string(raw)
		open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open >= 0 && closing > open && slices.Contains(names, s[open+1:closing]) {
			pid, _ := strconv.Atoi(strings.Fields(s)[0])
			return pid
		}
	}
	return 0
}

// statCPU reads utime+stime from a /proc stat file.
func statCPU(path string) (time.Duration, bool) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	s := string(raw)
	closing := strings.LastIndexByte(s, ')')
	if closing < 0 {
		return 0, false
	}
	f := strings.Fields(s[closing+1:])
	if len(f) < 13 {
		return 0, false
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * (time.Second / 100), true // USER_HZ is 100 on Linux
}

// procCPU sums utime+stime of the processes whose command name is one of names.
func procCPU(names ...string) time.Duration {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var total time.Duration
	for _, path := range stats {
		raw, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		s := string(raw)
		open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || closing < open || !slices.Contains(names, s[open+1:closing]) {
			continue
		}
		if cpu, ok := statCPU(path); ok {
			total += cpu
		}
	}
	return total
}

// statusVars are the server counters the harness reports as deltas.
var statusVars = []string{"Questions", "Com_begin", "Com_commit", "Com_select", "Com_update", "Com_insert",
	"Com_insert_select", "Innodb_rows_read", "Innodb_rows_updated", "Innodb_rows_inserted",
	"Innodb_row_lock_waits", "Handler_read_key", "Handler_read_next"}

type serverCounters map[string]int64

func (c serverCounters) minus(o serverCounters) serverCounters {
	d := serverCounters{}
	for k, v := range c {
		d[k] = v - o[k]
	}
	return d
}

func (c serverCounters) String() string {
	var parts []string
	for _, k := range statusVars {
		parts = append(parts, fmt.Sprintf("%s=%d", k, c[k]))
	}
	return strings.Join(parts, " ")
}

func serverStatus(tb testing.TB, db *sql.DB) serverCounters {
	tb.Helper()
	c := serverCounters{}
	rows, err := db.Query("SHOW GLOBAL STATUS")
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			tb.Fatal(err)
		}
		if slices.Contains(statusVars, name) {
			c[name], _ = strconv.ParseInt(value, 10, 64)
		}
	}
	return c
}

func innodbDeadlocks(tb testing.TB, db *sql.DB) int64 {
	tb.Helper()
	var name string
	var n int64
	if err := db.QueryRow("SHOW GLOBAL STATUS LIKE 'Innodb_deadlocks'").Scan(&name, &n); err != nil {
		tb.Logf("Innodb_deadlocks: %v", err)
	}
	return n
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
