package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
)

// backend holds sales whose stock is split in buckets: MySQL rows or Redis keys.
type backend interface {
	// Name is "mysql" or "redis".
	Name() string
	// NewSale creates a sale with units[i] units in bucket i. A blind sale decrements without
	// the condition: the negative control, which oversells.
	NewSale(ctx context.Context, units []int64, blind bool) (sale, error)
	// Describe names the server and the settings that bound its write rate (durability).
	Describe(ctx context.Context) string
	Close() error
}

// sale is one sale's buckets. Take is one call to the store; Left one query in MySQL and one
// GET per bucket in Redis (pipelined on one node; one call each in a cluster, where the buckets
// live in different slots); Move one transaction in MySQL and two scripts in Redis.
type sale interface {
	// Take takes one unit from bucket b if it has one, and reports whether it did.
	Take(ctx context.Context, b int) (bool, error)
	// Left reads the units left in every bucket.
	Left(ctx context.Context) ([]int64, error)
	// Move moves n units from bucket from to bucket to if from has them, and reports whether
	// it did. It returns how many calls it took.
	Move(ctx context.Context, from, to int, n int64) (moved bool, calls int, err error)
	// Delete removes the sale.
	Delete(ctx context.Context) error
}

var validName = regexp.MustCompile(`^[A-Za-z0-9_]{1,64}$`)

// bucketTable is the MySQL table of every sale's buckets: one row per bucket.
const bucketTable = "bucket"

// takeStatement is R's statement (loadtest/internal/yardstick), on a bucket's row.
const takeStatement = "UPDATE " + bucketTable + " SET stock = stock - 1 WHERE id = ? AND stock >= 1"

// blindStatement is the negative control: the decrement without its condition.
const blindStatement = "UPDATE " + bucketTable + " SET stock = stock - 1 WHERE id = ?"

// mysqlBackend keeps each bucket in a row of its own.
type mysqlBackend struct {
	db   *sql.DB
	sale atomic.Int64
}

// openMySQL drops and recreates database on the server of dsn (its own database name is
// ignored) and creates the bucket table in it. conns bounds the pool.
func openMySQL(ctx context.Context, dsn, database string, conns int) (*mysqlBackend, error) {
	if !validName.MatchString(database) {
		return nil, fmt.Errorf("database name %q: want letters, digits and _", database)
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("mysql DSN: %w", err)
	}
	cfg.DBName = ""
	cfg.InterpolateParams = true // one statement, one round trip, as R and the app
	server, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, err
	}
	defer server.Close()
	for _, q := range []string{"DROP DATABASE IF EXISTS `" + database + "`", "CREATE DATABASE `" + database + "`"} {
		if _, err := server.ExecContext(ctx, q); err != nil {
			return nil, fmt.Errorf("mysql: %s: %w", q, err)
		}
	}
	cfg.DBName = database
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	if _, err := db.ExecContext(ctx, "CREATE TABLE "+bucketTable+
		" (id BIGINT AUTO_INCREMENT PRIMARY KEY, sale BIGINT NOT NULL, idx INT NOT NULL, stock BIGINT NOT NULL, UNIQUE KEY sale_idx (sale, idx)) ENGINE=InnoDB"); err != nil {
		db.Close()
		return nil, fmt.Errorf("mysql: create table: %w", err)
	}
	return &mysqlBackend{db: db}, nil
}

// dropMySQL drops database.
func dropMySQL(ctx context.Context, dsn, database string) error {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return err
	}
	cfg.DBName = ""
	server, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return err
	}
	defer server.Close()
	_, err = server.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+database+"`")
	return err
}

func (m *mysqlBackend) Name() string { return "mysql" }

func (m *mysqlBackend) Describe(ctx context.Context) string {
	var version, flush, iso string
	err := m.db.QueryRowContext(ctx, "SELECT @@version, @@innodb_flush_log_at_trx_commit, @@tx_isolation").Scan(&version, &flush, &iso)
	if err != nil {
		return "MySQL (" + err.Error() + ")"
	}
	return fmt.Sprintf("MySQL %s, innodb_flush_log_at_trx_commit=%s, %s", version, flush, iso)
}
func (m *mysqlBackend) Close() error { return m.db.Close() }

func (m *mysqlBackend) NewSale(ctx context.Context, units []int64, blind bool) (sale, error) {
	id := m.sale.Add(1)
	s := &mysqlSale{db: m.db, id: id, ids: make([]int64, len(units)), take: takeStatement}
	if blind {
		s.take = blindStatement
	}
	for i, u := range units {
		res, err := m.db.ExecContext(ctx, "INSERT INTO "+bucketTable+" (sale, idx, stock) VALUES (?, ?, ?)", id, i, u)
		if err != nil {
			return nil, fmt.Errorf("mysql: insert bucket %d: %w", i, err)
		}
		if s.ids[i], err = res.LastInsertId(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

type mysqlSale struct {
	db   *sql.DB
	id   int64
	ids  []int64 // row id of each bucket
	take string
}

func (s *mysqlSale) Take(ctx context.Context, b int) (bool, error) {
	res, err := s.db.ExecContext(ctx, s.take, s.ids[b])
	if err != nil {
		return false, fmt.Errorf("mysql: take from bucket %d: %w", b, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func (s *mysqlSale) Left(ctx context.Context) ([]int64, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT idx, stock FROM "+bucketTable+" WHERE sale = ?", s.id)
	if err != nil {
		return nil, fmt.Errorf("mysql: read buckets: %w", err)
	}
	defer rows.Close()
	left := make([]int64, len(s.ids))
	for rows.Next() {
		var i int
		var n int64
		if err := rows.Scan(&i, &n); err != nil {
			return nil, err
		}
		left[i] = n
	}
	return left, rows.Err()
}

// Move is one transaction over the two rows, locked in id order so that two moves in opposite
// directions wait for each other instead of deadlocking.
func (s *mysqlSale) Move(ctx context.Context, from, to int, n int64) (bool, int, error) {
	for attempt := 0; ; attempt++ {
		moved, err := s.move(ctx, from, to, n)
		var me *mysql.MySQLError
		if errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205) && attempt < 5 {
			continue // deadlock or lock wait timeout: the whole transaction again
		}
		return moved, 1, err
	}
}

func (s *mysqlSale) move(ctx context.Context, from, to int, n int64) (moved bool, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer func() {
		if err != nil || !moved {
			_ = tx.Rollback()
		}
	}()
	if _, err := tx.ExecContext(ctx, "SELECT id FROM "+bucketTable+" WHERE id IN (?, ?) ORDER BY id FOR UPDATE", s.ids[from], s.ids[to]); err != nil {
		return false, fmt.Errorf("mysql: lock buckets %d and %d: %w", from, to, err)
	}
	res, err := tx.ExecContext(ctx, "UPDATE "+bucketTable+" SET stock = stock - ? WHERE id = ? AND stock >= ?", n, s.ids[from], n)
	if err != nil {
		return false, fmt.Errorf("mysql: move from bucket %d: %w", from, err)
	}
	if k, err := res.RowsAffected(); err != nil || k != 1 {
		return false, err
	}
	if _, err := tx.ExecContext(ctx, "UPDATE "+bucketTable+" SET stock = stock + ? WHERE id = ?", n, s.ids[to]); err != nil {
		return false, fmt.Errorf("mysql: move to bucket %d: %w", to, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("mysql: commit move: %w", err)
	}
	return true, nil
}

func (s *mysqlSale) Delete(ctx context.Context) error {
	_, err := s.db.ExecContext(ctx, "DELETE FROM "+bucketTable+" WHERE sale = ?", s.id)
	return err
}

// takeScript is the decrement-if-positive of one bucket, the core of the project's purchase
// script without its buyers and stream. It answers the units left, -1 for an empty bucket, -2
// for a bucket that does not exist.
var takeScript = redis.NewScript(strings.TrimSpace(`
local s = tonumber(redis.call('GET', KEYS[1]))
if not s then return -2 end
if s < 1 then return -1 end
return redis.call('DECR', KEYS[1])`))

// takeNScript takes ARGV[1] units from a bucket if it has them: the first half of a Redis move.
var takeNScript = redis.NewScript(strings.TrimSpace(`
local s = tonumber(redis.call('GET', KEYS[1]))
local n = tonumber(ARGV[1])
if not s or s < n then return 0 end
redis.call('DECRBY', KEYS[1], n)
return 1`))

// redisBackend keeps each bucket in a key of its own hash tag: in a Redis Cluster the buckets of
// one sale spread over the slots, which is the point of splitting it. No command touches two
// buckets, so it runs on one node and on a cluster alike.
type redisBackend struct {
	rdb     redis.UniversalClient
	cluster *redis.ClusterClient // nil on one node
	prefix  string
	sale    atomic.Int64
	run     string
}

// openRedis connects to the Redis at addr, or, with cluster set, to the Redis Cluster that
// cluster's comma-separated seed addresses belong to.
func openRedis(ctx context.Context, addr, cluster, prefix string, conns int) (*redisBackend, error) {
	if !strings.HasPrefix(prefix, "seckill:") || strings.ContainsAny(prefix, "{}*?[] ") {
		return nil, fmt.Errorf("redis prefix %q: want seckill:… without braces, globs or spaces", prefix)
	}
	opts := &redis.UniversalOptions{Addrs: []string{addr}, PoolSize: conns, MinIdleConns: min(conns, 16)}
	if cluster != "" {
		opts.Addrs, opts.IsClusterMode = strings.Split(cluster, ","), true
	}
	rdb := redis.NewUniversalClient(opts)
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("redis at %s: %w", strings.Join(opts.Addrs, ","), err)
	}
	b := &redisBackend{rdb: rdb, prefix: prefix, run: strconv.FormatInt(time.Now().UnixNano(), 36)}
	b.cluster, _ = rdb.(*redis.ClusterClient)
	return b, nil
}

// masters counts the cluster masters that hold keys: 1 on one node.
func (r *redisBackend) masters(ctx context.Context, keys []string) (int, error) {
	if r.cluster == nil {
		return 1, nil
	}
	seen := map[string]bool{}
	for _, k := range keys {
		c, err := r.cluster.MasterForKey(ctx, k)
		if err != nil {
			return 0, err
		}
		seen[c.Options().Addr] = true
	}
	return len(seen), nil
}

func (r *redisBackend) Name() string { return "redis" }

func (r *redisBackend) Describe(ctx context.Context) string {
	info, err := r.rdb.Info(ctx, "server").Result()
	version := "?"
	if err == nil {
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
				version = v
			}
		}
	}
	aof, err1 := r.rdb.ConfigGet(ctx, "appendonly").Result()
	fsync, err2 := r.rdb.ConfigGet(ctx, "appendfsync").Result()
	if err := errors.Join(err, err1, err2); err != nil {
		return "Redis " + version + " (" + err.Error() + ")"
	}
	topology := "one node"
	if r.cluster != nil {
		var masters atomic.Int64
		_ = r.cluster.ForEachMaster(ctx, func(context.Context, *redis.Client) error { masters.Add(1); return nil })
		topology = fmt.Sprintf("a cluster of %d masters", masters.Load())
	}
	return fmt.Sprintf("Redis %s, %s, appendonly=%s, appendfsync=%s", version, topology, aof["appendonly"], fsync["appendfsync"])
}

// Close deletes every key of this run (under the prefix), then closes the client.
func (r *redisBackend) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var err error
	if r.cluster != nil {
		err = r.cluster.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			return deleteKeys(ctx, c, r.prefix+"{"+r.run+":")
		})
	} else {
		err = deleteKeys(ctx, r.rdb, r.prefix+"{"+r.run+":")
	}
	return errors.Join(err, r.rdb.Close())
}

// deleteKeys deletes the keys under prefix (SCAN and DEL one by one, as a cluster node wants
// them; never FLUSHALL, others share this Redis).
func deleteKeys(ctx context.Context, rdb redis.Cmdable, prefix string) error {
	iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var batch []string
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return err
	}
	return delEach(ctx, rdb, batch)
}

// delEach deletes keys with one DEL each, pipelined: the keys may live in different slots.
func delEach(ctx context.Context, rdb redis.Cmdable, keys []string) error {
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.Del(ctx, k)
		}
		return nil
	})
	return err
}

func (r *redisBackend) NewSale(ctx context.Context, units []int64, blind bool) (sale, error) {
	id := r.sale.Add(1)
	s := &redisSale{rdb: r.rdb, keys: make([]string, len(units)), blind: blind}
	for i := range units {
		// One hash tag per bucket: the sale's buckets land in different cluster slots.
		s.keys[i] = fmt.Sprintf("%s{%s:%d:%d}", r.prefix, r.run, id, i)
	}
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, u := range units {
			p.Set(ctx, s.keys[i], u, 0)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redis: load sale: %w", err)
	}
	if s.masters, err = r.masters(ctx, s.keys); err != nil {
		return nil, fmt.Errorf("redis: masters of the sale: %w", err)
	}
	return s, nil
}

type redisSale struct {
	rdb     redis.UniversalClient
	keys    []string
	blind   bool
	masters int // the cluster masters holding the buckets (1 on one node)
}

func (s *redisSale) Take(ctx context.Context, b int) (bool, error) {
	if s.blind {
		return true, s.rdb.Decr(ctx, s.keys[b]).Err()
	}
	left, err := takeScript.Run(ctx, s.rdb, s.keys[b:b+1]).Int64()
	switch {
	case err != nil:
		return false, fmt.Errorf("redis: take from bucket %d: %w", b, err)
	case left == -2:
		return false, fmt.Errorf("redis: bucket %d is missing", b)
	}
	return left >= 0, nil
}

func (s *redisSale) Left(ctx context.Context) ([]int64, error) {
	cmds, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range s.keys {
			p.Get(ctx, k)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redis: read buckets: %w", err)
	}
	left := make([]int64, len(cmds))
	for i, c := range cmds {
		if left[i], err = c.(*redis.StringCmd).Int64(); err != nil {
			return nil, fmt.Errorf("redis: bucket %d: %w", i, err)
		}
	}
	return left, nil
}

// Move is two scripts, one per slot: in a cluster no script may touch two buckets. Between them
// the n units are in neither bucket, and a crash there loses them.
func (s *redisSale) Move(ctx context.Context, from, to int, n int64) (bool, int, error) {
	ok, err := takeNScript.Run(ctx, s.rdb, s.keys[from:from+1], n).Int64()
	if err != nil || ok != 1 {
		return false, 1, err
	}
	if err := s.rdb.IncrBy(ctx, s.keys[to], n).Err(); err != nil {
		return false, 2, fmt.Errorf("redis: move %d units to bucket %d (taken from %d, now in neither): %w", n, to, from, err)
	}
	return true, 2, nil
}

func (s *redisSale) Delete(ctx context.Context) error { return delEach(ctx, s.rdb, s.keys) }
