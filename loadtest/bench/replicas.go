package main

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/redisconn"
	"github.com/seckill-go/seckill-go/internal/stock/redislua"
)

// replica is one `seckill serve` process that the bench started.
type replica struct {
	name     string
	url      string // http://127.0.0.1:port
	pprofURL string // http://127.0.0.1:port of its pprof listener
	logPath  string
	cmd      *exec.Cmd
	done     chan struct{} // closed when the process has exited
}

// cluster is the bench's own replicas of one configuration.
type cluster struct {
	replicas []*replica
	say      func(string, ...any)
}

// pids are the replicas' process ids.
func (c *cluster) pids() []int {
	out := make([]int, len(c.replicas))
	for i, r := range c.replicas {
		out[i] = r.cmd.Process.Pid
	}
	return out
}

func (c *cluster) urls() []string {
	out := make([]string, len(c.replicas))
	for i, r := range c.replicas {
		out[i] = r.url
	}
	return out
}

// replicaEnv is the environment of one replica: base (scripts/env.sh's) with set applied and the
// names in unset removed.
func replicaEnv(base []string, set map[string]string, unset ...string) []string {
	out := make([]string, 0, len(base)+len(set))
	for _, kv := range base {
		name, _, _ := strings.Cut(kv, "=")
		if _, replaced := set[name]; replaced || slices.Contains(unset, name) {
			continue
		}
		out = append(out, kv)
	}
	names := make([]string, 0, len(set))
	for name := range set {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		out = append(out, name+"="+set[name])
	}
	return out
}

// stackEnv sources the local stack's environment script (scripts/env.sh) in bash and returns
// the environment it exports, this process's own included.
func stackEnv(ctx context.Context, script string) ([]string, error) {
	if _, err := os.Stat(script); err != nil {
		return nil, fmt.Errorf("%w (run the bench from the repository root: make bench)", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "bash", "-c", `. "$1" && env -0`, "bash", script).Output()
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", script, err)
	}
	var env []string
	for _, kv := range strings.Split(string(out), "\x00") {
		if strings.Contains(kv, "=") {
			env = append(env, kv)
		}
	}
	return env, nil
}

// freeAddrs returns n distinct loopback addresses whose ports were free a moment ago. The
// listeners are all held until every port is picked: closed one by one, the kernel may hand the
// same port out twice.
func freeAddrs(n int) ([]string, error) {
	out := make([]string, n)
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		out[i] = ln.Addr().String()
	}
	return out, nil
}

// startCluster starts n replicas of the seckill binary with env plus the bench's settings (see
// benchEnv), each on free loopback ports, logging to logDir, and returns once each answers
// /readyz. On failure it stops what it started.
func startCluster(ctx context.Context, seckill string, n int, env func(i int, addr, pprof string, peers []string) []string, logDir, label string, say func(string, ...any)) (*cluster, error) {
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	c := &cluster{say: say}
	free, err := freeAddrs(2 * n)
	if err != nil {
		return nil, err
	}
	addrs, pprofs := free[:n], free[n:]
	peers := make([]string, n)
	for i := range n {
		peers[i] = "http://" + addrs[i]
	}
	for i := range n {
		r := &replica{
			name:     fmt.Sprintf("replica-%d", i+1),
			url:      peers[i],
			pprofURL: "http://" + pprofs[i],
			logPath:  filepath.Join(logDir, fmt.Sprintf("replica-%d-%s.log", i+1, label)),
			done:     make(chan struct{}),
		}
		logf, err := os.Create(r.logPath)
		if err != nil {
			c.stop()
			return nil, err
		}
		r.cmd = exec.Command(seckill, "serve")
		r.cmd.Env = env(i, addrs[i], pprofs[i], peers)
		r.cmd.Stdout, r.cmd.Stderr = logf, logf
		// Its own process group, so a Ctrl-C reaches the bench, which stops the replicas in order;
		// SIGTERM if the bench dies without doing so.
		r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
		if err := r.cmd.Start(); err != nil {
			logf.Close()
			c.stop()
			return nil, fmt.Errorf("start %s: %w (make build?)", seckill, err)
		}
		go func() {
			_ = r.cmd.Wait()
			logf.Close()
			close(r.done)
		}()
		c.replicas = append(c.replicas, r)
		say("%s: pid %d on %s (pprof %s), log %s", r.name, r.cmd.Process.Pid, r.url, r.pprofURL, r.logPath)
	}
	for _, r := range c.replicas {
		if err := r.waitReady(ctx, 90*time.Second); err != nil {
			c.stop()
			return nil, err
		}
	}
	return c, nil
}

// waitReady polls /readyz until it answers 200, the process exits, or timeout passes.
func (r *replica) waitReady(ctx context.Context, timeout time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(timeout)
	for {
		res, err := client.Get(r.url + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-r.done:
			return fmt.Errorf("%s exited during start-up:\n%s", r.name, tail(r.logPath, 20))
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s:\n%s", r.name, timeout, tail(r.logPath, 20))
		}
	}
}

// stop sends SIGTERM to every replica by its pid, waits up to 20 s (more than the app's shutdown
// grace of 15 s), then sends SIGKILL to any left.
func (c *cluster) stop() {
	var wg sync.WaitGroup
	for _, r := range c.replicas {
		wg.Go(func() {
			_ = r.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-r.done:
			case <-time.After(20 * time.Second):
				c.say("%s (pid %d) still runs 20 s after SIGTERM: SIGKILL", r.name, r.cmd.Process.Pid)
				_ = r.cmd.Process.Kill()
				<-r.done
			}
		})
	}
	wg.Wait()
	c.replicas = nil
}

// tail returns the last n lines of a file, for error messages.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// envValue returns name's value in env (KEY=value entries; the last wins), or def.
func envValue(env []string, name, def string) string {
	v := def
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == name && val != "" {
			v = val
		}
	}
	return v
}

// dropRedisSales deletes what earlier runs' redis-lua sales left in Redis under the bench's
// namespace (the app's is its database's name): with the database dropped they belong to no
// product, and a Redis that logs every write (appendonly) rewrites its whole data set each time its
// log doubles, inside the phases of this run.
func dropRedisSales(ctx context.Context, t redisconn.Topology, dsn string) error {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return fmt.Errorf("-mysql-dsn: %w", err)
	}
	rdb := redisconn.Open(t, redis.UniversalOptions{})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// Each master holds its own share of a cluster's keys; one UNLINK per key, pipelined, since
	// the keys of different sales live in different slots.
	err = redisconn.ForEachMaster(ctx, rdb, func(ctx context.Context, node *redis.Client) error {
		iter := node.Scan(ctx, 0, redislua.KeysPattern(cfg.DBName), 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			return fmt.Errorf("scan the bench's sales (is Redis up? make services): %w", err)
		}
		for batch := range slices.Chunk(keys, 500) {
			if _, err := node.Pipelined(ctx, func(p redis.Pipeliner) error {
				for _, k := range batch {
					p.Unlink(ctx, k)
				}
				return nil
			}); err != nil {
				return fmt.Errorf("delete the bench's sales: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("redis, %s: %w", t, err)
	}
	return nil
}

// dropDatabase drops the bench's database so that every run starts from empty tables; the
// replicas create and migrate it again (SECKILL_AUTO_MIGRATE). It refuses any database whose
// name does not start with seckill_bench: a mistyped -mysql-dsn must not drop the app's.
func dropDatabase(ctx context.Context, dsn string) error {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return fmt.Errorf("-mysql-dsn: %w", err)
	}
	name := cfg.DBName
	if !strings.HasPrefix(name, "seckill_bench") || strings.ContainsAny(name, "`'\" ") {
		return fmt.Errorf("-mysql-dsn: the bench drops its database each run, so its name must start with seckill_bench (got %q)", name)
	}
	cfg.DBName = ""
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
		return fmt.Errorf("drop database %s (is MariaDB up? make services): %w", name, err)
	}
	return nil
}

// serverDSN is dsn without its database: where R creates its scratch database.
func serverDSN(dsn string) (string, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", err
	}
	cfg.DBName = ""
	return cfg.FormatDSN(), nil
}
