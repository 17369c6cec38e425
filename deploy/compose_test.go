package deploy

import (
	"encoding/base64"
	"io"
	"maps"
	"net"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/google/go-cmp/cmp"

	"github.com/seckill-go/seckill-go/internal/config"
	"github.com/seckill-go/seckill-go/internal/tracing"
)

const composeFile = "docker-compose.yml"

// The services docker-compose.yml must define, by profile ("" = always).
var wantServices = map[string]string{
	"mysql": "", "redis": "", "zookeeper": "", "kafka": "", "kafka-init": "", "migrate": "", "seed": "",
	"app1": "", "app2": "", "app3": "", "worker": "", "nginx": "",
	"redlock1": "", "redlock2": "", "redlock3": "", "redlock4": "", "redlock5": "", "memcached": "",
	"prometheus": "observability", "grafana": "observability", "loadtest": "loadtest",
	"rc1": "cluster", "rc2": "cluster", "rc3": "cluster", "rc4": "cluster", "rc5": "cluster", "rc6": "cluster", "rc-init": "cluster",
	"jaeger": "tracing",
}

// oneShots run once and exit 0; others wait for them with service_completed_successfully. A
// healthcheck means nothing for them: there is no "healthy" to reach before they are done.
var oneShots = []string{"kafka-init", "migrate", "seed", "loadtest", "rc-init"}

// replicas are the API replicas nginx balances over.
var replicas = []string{"app1", "app2", "app3"}

// The lock zoo's own servers: the redlock strategy's independent Redis servers and the memcached
// strategy's Memcached (SECKILL_REDLOCK_ADDRS, SECKILL_MEMCACHED_ADDR).
var (
	redlockServers = []string{"redlock1", "redlock2", "redlock3", "redlock4", "redlock5"}
	zooServers     = append(slices.Clone(redlockServers), "memcached")
)

// compose is docker-compose.yml after Compose's interpolation (with no variable set, so the
// defaults), in the shapes the checks need.
type compose struct {
	services map[string]*service
	volumes  map[string]bool
}

type service struct {
	name        string
	image       string
	buildTarget string // "" without build:
	command     []string
	entrypoint  []string
	env         map[string]string // env_file, then environment over it: what the container sees
	dependsOn   map[string]string // service -> condition
	healthcheck map[string]any    // nil without healthcheck:
	ports       []string
	volumes     []string
	profiles    []string
	restart     string
	stopGrace   time.Duration
	readOnly    bool
	capDrop     []string
}

// healthTest returns the healthcheck's command, or nil if there is none or it is disabled.
func (s *service) healthTest() []string {
	if s.healthcheck == nil || s.healthcheck["disable"] == true {
		return nil
	}
	return strs(s.healthcheck["test"])
}

// seckillCommand returns the seckill command a service of the app image runs ("" for others).
func (s *service) seckillCommand() string {
	if s.buildTarget != "runtime" || len(s.command) == 0 {
		return ""
	}
	return s.command[0]
}

func loadCompose(tb testing.TB) *compose {
	tb.Helper()
	return loadComposeFiles(tb, composeFile)
}

// loadComposeFiles loads docker-compose.yml with override files after it, merged as Compose
// merges `-f a -f b` (mergeService).
func loadComposeFiles(tb testing.TB, files ...string) *compose {
	tb.Helper()
	c := &compose{services: map[string]*service{}, volumes: map[string]bool{}}
	svcs := map[string]any{}
	for i, file := range files {
		var doc map[string]any
		readYAML(tb, file, &doc)
		for k := range doc {
			if k != "services" && k != "volumes" && !strings.HasPrefix(k, "x-") {
				tb.Errorf("%s: top-level %q: only services, volumes and x- extensions (Compose v1 refuses name: and friends)", file, k)
			}
		}
		if _, err := interpolateTree(doc, map[string]string{}); err != nil {
			tb.Fatalf("%s: %v", file, err)
		}
		vols, _ := doc["volumes"].(map[string]any)
		for name := range vols {
			c.volumes[name] = true
		}
		fileSvcs, ok := doc["services"].(map[string]any)
		if !ok {
			tb.Fatalf("%s: no services", file)
		}
		for name, raw := range fileSvcs {
			over, ok := raw.(map[string]any)
			if !ok {
				tb.Fatalf("%s: service %s: not a mapping", file, name)
			}
			base, ok := svcs[name].(map[string]any)
			if !ok && i > 0 {
				tb.Errorf("%s: service %s is not in %s", file, name, files[0])
			}
			svcs[name] = mergeService(base, over)
		}
	}
	for name, raw := range svcs {
		m, ok := raw.(map[string]any)
		if !ok {
			tb.Fatalf("service %s: not a mapping", name)
		}
		c.services[name] = newService(tb, name, m)
	}
	return c
}

// mergeService merges an override's service into the base one as Compose does for the keys the
// project's override files use: environment and depends_on key by key, anything else replaced.
// Neither argument is changed (YAML aliases share their maps).
func mergeService(base, over map[string]any) map[string]any {
	out := maps.Clone(base)
	if out == nil {
		out = map[string]any{}
	}
	for k, v := range over {
		b, bok := out[k].(map[string]any)
		o, ook := v.(map[string]any)
		if (k == "environment" || k == "depends_on") && bok && ook {
			m := maps.Clone(b)
			maps.Copy(m, o)
			out[k] = m
			continue
		}
		out[k] = v
	}
	return out
}

func newService(tb testing.TB, name string, m map[string]any) *service {
	tb.Helper()
	s := &service{
		name:       name,
		image:      scalar(m["image"]),
		command:    strs(m["command"]),
		entrypoint: strs(m["entrypoint"]),
		env:        map[string]string{},
		dependsOn:  map[string]string{},
		ports:      strs(m["ports"]),
		volumes:    strs(m["volumes"]),
		profiles:   strs(m["profiles"]),
		restart:    scalar(m["restart"]),
		capDrop:    strs(m["cap_drop"]),
	}
	if b, ok := m["build"].(map[string]any); ok {
		s.buildTarget = scalar(b["target"])
		if ctx := scalar(b["context"]); ctx != "." {
			tb.Errorf("service %s: build context %q, want . (the Dockerfile at the root)", name, ctx)
		}
	}
	s.healthcheck, _ = m["healthcheck"].(map[string]any)
	s.readOnly, _ = m["read_only"].(bool)
	if g := scalar(m["stop_grace_period"]); g != "" {
		d, err := time.ParseDuration(g)
		if err != nil {
			tb.Errorf("service %s: stop_grace_period: %v", name, err)
		}
		s.stopGrace = d
	}
	for _, f := range strs(m["env_file"]) {
		for k, v := range parseEnvFile(tb, f) {
			s.env[k] = v
		}
	}
	switch env := m["environment"].(type) {
	case map[string]any:
		for k, v := range env {
			s.env[k] = scalar(v)
		}
	case []any:
		for _, kv := range strs(env) {
			k, v, _ := strings.Cut(kv, "=")
			s.env[k] = v
		}
	}
	switch deps := m["depends_on"].(type) {
	case nil:
	case map[string]any:
		for dep, v := range deps {
			cond, _ := v.(map[string]any)
			s.dependsOn[dep] = scalar(cond["condition"])
		}
	default:
		tb.Errorf("service %s: depends_on must be the long form with a condition, not %T", name, deps)
	}
	return s
}

func TestComposeServices(t *testing.T) {
	c := loadCompose(t)
	got := map[string]string{}
	for name, s := range c.services {
		if len(s.profiles) > 1 {
			t.Errorf("service %s: profiles %v, want at most one", name, s.profiles)
		}
		got[name] = strings.Join(s.profiles, ",")
	}
	if diff := cmp.Diff(wantServices, got); diff != "" {
		t.Errorf("services and their profiles (-want +got):\n%s", diff)
	}
}

// TestComposeImages: images are pinned, and the ones with version constraints have them.
func TestComposeImages(t *testing.T) {
	c := loadCompose(t)
	want := map[string]string{ // service -> image name and version prefix
		"mysql":     "mysql:8.4.",
		"redis":     "redis:7.",
		"zookeeper": "zookeeper:3.9.",
		// kafka-go's consumer groups need API versions Kafka 4.0 removed: 3.9 only.
		"kafka":      "apache/kafka:3.9.",
		"kafka-init": "apache/kafka:3.9.",
		"memcached":  "memcached:1.6.",
	}
	for _, r := range redlockServers {
		want[r] = "redis:7." // the same server as redis's, so that redlock is measured beside it
	}
	for _, name := range sortedKeys(c.services) {
		s := c.services[name]
		if s.buildTarget != "" {
			if s.image == "" {
				t.Errorf("service %s: builds target %q but names no image: each service would build its own", name, s.buildTarget)
			}
			continue
		}
		_, tag, ok := strings.Cut(s.image, ":")
		if !ok || tag == "latest" || !strings.ContainsAny(tag, "0123456789") || strings.Count(tag, ".") < 2 {
			t.Errorf("service %s: image %q is not pinned to a full version (repo:X.Y.Z)", name, s.image)
		}
		if prefix := want[name]; prefix != "" && !strings.HasPrefix(s.image, prefix) {
			t.Errorf("service %s: image %q, want %s*", name, s.image, prefix)
		}
	}
	// Every service of the app image builds the same image the same way.
	var images []string
	for _, name := range sortedKeys(c.services) {
		if s := c.services[name]; s.buildTarget == "runtime" {
			images = append(images, s.image)
		}
	}
	slices.Sort(images)
	if len(slices.Compact(images)) != 1 {
		t.Errorf("services of the runtime target use images %v, want one", images)
	}
}

// appServices returns the services that run the seckill image, by name.
func appServices(c *compose) map[string]*service {
	out := map[string]*service{}
	for name, s := range c.services {
		if s.buildTarget == "runtime" {
			out[name] = s
		}
	}
	return out
}

// loadAppConfig loads the app's configuration from a service's environment, as the process in
// the container will: config.Load is the same code, so a setting the app requires and the compose
// file lacks fails here.
func loadAppConfig(t *testing.T, s *service) *config.Config {
	t.Helper()
	cmd := s.seckillCommand()
	cfg, err := config.Load("seckill "+cmd, s.command[1:], func(k string) string { return s.env[k] }, io.Discard)
	if err != nil {
		t.Fatalf("service %s: the app refuses its settings: %v", s.name, err)
	}
	return cfg
}

// knownSettings returns the SECKILL_* variables the app reads, from the configuration itself.
func knownSettings(cfg *config.Config) map[string]string {
	out := map[string]string{}
	for _, a := range cfg.LogValue().Group() {
		out[a.Key] = a.Value.String()
	}
	return out
}

// TestComposeAppSettings: every process of the app image (replicas, worker, migrate, seed) gets
// settings the app accepts, pointing at the compose services, the same ones for all.
func TestComposeAppSettings(t *testing.T) {
	c := loadCompose(t)
	apps := appServices(c)
	wantCmds := map[string]string{"app1": "serve", "app2": "serve", "app3": "serve", "worker": "worker", "migrate": "migrate", "seed": "seed"}
	gotCmds := map[string]string{}
	for name, s := range apps {
		gotCmds[name] = s.seckillCommand()
	}
	if diff := cmp.Diff(wantCmds, gotCmds); diff != "" {
		t.Fatalf("services of the app image and their commands (-want +got):\n%s", diff)
	}

	mysqlEnv := c.services["mysql"].env
	shared := map[string]string{} // setting -> value every app process must agree on
	instances := map[string]string{}
	for _, name := range sortedKeys(apps) {
		s := apps[name]
		t.Run(name, func(t *testing.T) {
			cfg := loadAppConfig(t, s)
			known := knownSettings(cfg)
			for k := range s.env {
				if _, ok := known[k]; strings.HasPrefix(k, "SECKILL_") && !ok {
					t.Errorf("%s is not a setting of the app (a typo?)", k)
				}
			}
			for k, v := range known {
				if k == "OTEL_EXPORTER_OTLP_ENDPOINT" && cfg.Tracing.Exporter == tracing.Off {
					continue // read only with tracing on, which compose leaves off (no collector in it yet)
				}
				if strings.Contains(v, "127.0.0.1") || strings.Contains(v, "localhost") {
					t.Errorf("%s=%s: a loopback address inside a container (the local-stack default?)", k, v)
				}
			}
			dsn, err := mysql.ParseDSN(cfg.MySQL.DSN)
			if err != nil {
				t.Fatal(err)
			}
			checkServiceAddr(t, c, "SECKILL_MYSQL_DSN", dsn.Addr, "mysql", "3306")
			for _, f := range []struct{ what, dsn, mysql string }{
				{"user", dsn.User, mysqlEnv["MYSQL_USER"]},
				{"password", dsn.Passwd, mysqlEnv["MYSQL_PASSWORD"]},
				{"database", dsn.DBName, mysqlEnv["MYSQL_DATABASE"]},
			} {
				if f.dsn == "" || f.dsn != f.mysql {
					t.Errorf("SECKILL_MYSQL_DSN's %s is not the one the mysql service creates (MYSQL_%s)", f.what, strings.ToUpper(f.what))
				}
			}
			checkServiceAddr(t, c, "SECKILL_REDIS_ADDR", cfg.Redis.Addr, "redis", "6379")
			if len(cfg.ZK.Servers) != 1 || len(cfg.Kafka.Brokers) != 1 {
				t.Fatalf("want one ZooKeeper server and one Kafka broker, got %v and %v", cfg.ZK.Servers, cfg.Kafka.Brokers)
			}
			checkServiceAddr(t, c, "SECKILL_ZK_SERVERS", cfg.ZK.Servers[0], "zookeeper", "2181")
			checkServiceAddr(t, c, "SECKILL_KAFKA_BROKERS", cfg.Kafka.Brokers[0], "kafka", "9092")
			// The redlock strategy's servers: every one of redlock1..5, each once, in order; not
			// the main redis (Redlock wants servers that fail apart).
			if len(cfg.ZooLocks.RedlockAddrs) != len(redlockServers) {
				t.Errorf("SECKILL_REDLOCK_ADDRS names %d servers %v, want %v", len(cfg.ZooLocks.RedlockAddrs), cfg.ZooLocks.RedlockAddrs, redlockServers)
			} else {
				for i, a := range cfg.ZooLocks.RedlockAddrs {
					checkServiceAddr(t, c, "SECKILL_REDLOCK_ADDRS", a, redlockServers[i], "6379")
				}
			}
			checkServiceAddr(t, c, "SECKILL_MEMCACHED_ADDR", cfg.ZooLocks.MemcachedAddr, "memcached", "11211")

			for _, k := range []string{"SECKILL_MYSQL_DSN", "SECKILL_REDIS_ADDR", "SECKILL_ZK_SERVERS", "SECKILL_KAFKA_BROKERS",
				"SECKILL_KAFKA_TOPIC", "SECKILL_KAFKA_GROUP", "SECKILL_KAFKA_PARTITIONS", "SECKILL_ADMIN_TOKEN",
				"SECKILL_ALLOW_UNSAFE_STRATEGIES", "SECKILL_DEFAULT_STRATEGY", "SECKILL_HTTP_ADDR",
				"SECKILL_REDLOCK_ADDRS", "SECKILL_MEMCACHED_ADDR"} {
				v := s.env[k] // raw: LogValue masks secrets; unset means the same default everywhere
				if first, ok := shared[k]; ok && first != v {
					t.Errorf("%s differs from another app process's", k)
				}
				shared[k] = v
			}
			if cfg.InstanceID == "" || instances[cfg.InstanceID] != "" {
				t.Errorf("SECKILL_INSTANCE_ID %q is empty or also %s's", cfg.InstanceID, instances[cfg.InstanceID])
			}
			instances[cfg.InstanceID] = name

			switch s.seckillCommand() {
			case "serve":
				if !cfg.Run.API || cfg.Run.Relay || cfg.Run.Consumer {
					t.Errorf("a replica serves the API only (the worker relays and consumes), got %+v", cfg.Run)
				}
			case "worker":
				if !cfg.Run.Relay || !cfg.Run.Consumer {
					t.Errorf("the worker must relay and consume, got %+v", cfg.Run)
				}
			}
			if s.restart != "no" {
				// A long-running process gets more than its own drain time before Docker's SIGKILL.
				if s.stopGrace <= cfg.HTTP.ShutdownTimeout {
					t.Errorf("stop_grace_period %v is not longer than SECKILL_SHUTDOWN_TIMEOUT %v", s.stopGrace, cfg.HTTP.ShutdownTimeout)
				}
			}
			if !s.readOnly || !slices.Equal(s.capDrop, []string{"ALL"}) {
				t.Errorf("read_only %v, cap_drop %v: the app writes no file and needs no capability", s.readOnly, s.capDrop)
			}
		})
	}

	// The load test reads the same settings from its environment (see loadtest/internal/attack/options.go).
	lt := c.services["loadtest"]
	for _, k := range []string{"SECKILL_ADMIN_TOKEN", "SECKILL_MYSQL_DSN", "SECKILL_REDIS_ADDR", "SECKILL_ZK_SERVERS"} {
		if lt.env[k] != apps["app1"].env[k] {
			t.Errorf("loadtest: %s differs from the replicas'", k)
		}
	}
	var targets []string
	for i, a := range lt.entrypoint {
		if a == "-targets" && i+1 < len(lt.entrypoint) {
			targets = strings.Split(lt.entrypoint[i+1], ",")
		}
	}
	if diff := cmp.Diff(replicaURLs(t, c), targets); diff != "" {
		t.Errorf("loadtest -targets are not the replicas (-want +got):\n%s", diff)
	}
}

// checkServiceAddr checks that a HOST:PORT setting points at a compose service on its port.
func checkServiceAddr(t *testing.T, c *compose, setting, addr, wantHost, wantPort string) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Errorf("%s: %v", setting, err)
		return
	}
	if host != wantHost || port != wantPort {
		t.Errorf("%s points at %s, want %s:%s", setting, addr, wantHost, wantPort)
	}
	if _, ok := c.services[host]; !ok {
		t.Errorf("%s points at %s, which is no service of %s", setting, host, composeFile)
	}
}

// appPort returns the port a service of the app image listens on (SECKILL_HTTP_ADDR).
func appPort(t *testing.T, s *service) string {
	t.Helper()
	cfg := loadAppConfig(t, s)
	_, port, err := net.SplitHostPort(cfg.HTTP.Addr)
	if err != nil || port == "" || port == "0" {
		t.Fatalf("service %s: SECKILL_HTTP_ADDR %q has no fixed port", s.name, cfg.HTTP.Addr)
	}
	return port
}

// replicaAddrs returns HOST:PORT of every API replica, in name order: what nginx, Prometheus and
// the load test must name.
func replicaAddrs(t *testing.T, c *compose) []string {
	t.Helper()
	var out []string
	for _, name := range sortedKeys(appServices(c)) {
		if s := c.services[name]; s.seckillCommand() == "serve" {
			out = append(out, net.JoinHostPort(name, appPort(t, s)))
		}
	}
	if len(out) != len(replicas) {
		t.Fatalf("API replicas %v, want %v", out, replicas)
	}
	return out
}

func replicaURLs(t *testing.T, c *compose) []string {
	var out []string
	for _, a := range replicaAddrs(t, c) {
		out = append(out, "http://"+a)
	}
	return out
}

// TestComposeHealthchecks: every long-running service has a healthcheck; one-shots have none and
// do not restart.
func TestComposeHealthchecks(t *testing.T) {
	c := loadCompose(t)
	probe := runtimeProbe(t)
	for _, name := range sortedKeys(c.services) {
		s := c.services[name]
		test := s.healthTest()
		if slices.Contains(oneShots, name) {
			if test != nil {
				t.Errorf("%s: a one-shot with a healthcheck %v (nothing waits for it to be healthy)", name, test)
			}
			if s.restart != "no" {
				t.Errorf("%s: a one-shot must have restart: \"no\", has %q", name, s.restart)
			}
			continue
		}
		if len(test) < 2 || (test[0] != "CMD" && test[0] != "CMD-SHELL") {
			t.Errorf("%s: healthcheck test %v, want [CMD ...] or [CMD-SHELL ...]", name, test)
			continue
		}
		if s.restart != "unless-stopped" && s.restart != "always" {
			t.Errorf("%s: restart %q for a long-running service", name, s.restart)
		}
		if s.buildTarget == "runtime" {
			// The image has no shell: the probe binary the Dockerfile installs, on the app's port.
			if test[0] != "CMD" || test[1] != probe || len(test) != 3 || (test[2] != "/readyz" && test[2] != "/healthz") {
				t.Errorf("%s: healthcheck %v, want [CMD %s /readyz]", name, test, probe)
			}
		}
	}
}

// TestComposeStartOrder: depends_on makes `docker compose up` start everything in order, with
// nothing retried by hand.
func TestComposeStartOrder(t *testing.T) {
	c := loadCompose(t)
	for _, name := range sortedKeys(c.services) {
		s := c.services[name]
		for dep, cond := range s.dependsOn {
			d, ok := c.services[dep]
			switch {
			case !ok:
				t.Errorf("%s depends on %s, which does not exist", name, dep)
				continue
			case len(d.profiles) > 0 && !slices.Equal(d.profiles, s.profiles):
				t.Errorf("%s depends on %s, which runs only with profile %v", name, dep, d.profiles)
			}
			switch cond {
			case "service_healthy":
				if d.healthTest() == nil {
					t.Errorf("%s waits for %s to be healthy, which has no healthcheck", name, dep)
				}
			case "service_completed_successfully":
				if !slices.Contains(oneShots, dep) {
					t.Errorf("%s waits for %s to complete, which is not a one-shot", name, dep)
				}
			default:
				t.Errorf("%s depends on %s with condition %q, want service_healthy or service_completed_successfully", name, dep, cond)
			}
		}
	}
	closure := func(name string) map[string]bool {
		seen := map[string]bool{}
		var walk func(string, []string)
		walk = func(n string, path []string) {
			if slices.Contains(path, n) {
				t.Fatalf("depends_on cycle: %s", strings.Join(append(path, n), " -> "))
			}
			for dep := range c.services[n].dependsOn {
				seen[dep] = true
				walk(dep, append(path, n))
			}
		}
		walk(name, nil)
		return seen
	}
	for _, name := range sortedKeys(c.services) {
		closure(name) // cycles
	}
	for name, s := range appServices(c) {
		if cmd := s.seckillCommand(); cmd != "serve" && cmd != "worker" {
			continue
		}
		deps := closure(name)
		for _, want := range []string{"mysql", "redis", "zookeeper", "kafka", "kafka-init", "migrate"} {
			if !deps[want] {
				t.Errorf("%s starts without waiting for %s", name, want)
			}
		}
	}
	for _, r := range replicas {
		for _, front := range []string{"nginx", "loadtest"} {
			if c.services[front].dependsOn[r] != "service_healthy" {
				t.Errorf("%s must wait for replica %s to be healthy", front, r)
			}
		}
	}
	if c.services["nginx"].dependsOn["seed"] != "service_completed_successfully" {
		t.Error("nginx must wait for the seed, so that the storefront's first page has products")
	}
	if c.services["grafana"].dependsOn["prometheus"] != "service_healthy" {
		t.Error("grafana must wait for prometheus")
	}
}

// TestComposePorts: only the entry points are published, on 127.0.0.1 (the admin token is a
// public dev default), and nginx's are what it listens on: the public server and the
// operations one.
func TestComposePorts(t *testing.T) {
	c := loadCompose(t)
	ng := c.services["nginx"]
	want := map[string][]string{
		"nginx": {
			"127.0.0.1:8080:" + ng.env["SECKILL_LB_LISTEN"],
			"127.0.0.1:8079:" + ng.env["SECKILL_LB_OPS_LISTEN"],
		},
		"prometheus": {"127.0.0.1:9090:9090"},
		"grafana":    {"127.0.0.1:3000:3000"},
		"jaeger":     {"127.0.0.1:16686:16686"}, // the UI; OTLP stays inside the project's network
	}
	got := map[string][]string{}
	for name, s := range c.services {
		if len(s.ports) > 0 {
			got[name] = s.ports
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("published ports (-want +got):\n%s", diff)
	}
}

// TestComposeVolumes: bind mounts name files of the repository; data lives in named volumes.
func TestComposeVolumes(t *testing.T) {
	c := loadCompose(t)
	root := repoRoot(t)
	used := map[string]bool{}
	mounts := map[string]string{} // "service:target" -> source
	for _, name := range sortedKeys(c.services) {
		for _, v := range c.services[name].volumes {
			parts := strings.Split(v, ":")
			if len(parts) < 2 {
				t.Errorf("%s: volume %q, want SOURCE:TARGET[:ro]", name, v)
				continue
			}
			src, dst := parts[0], parts[1]
			mounts[name+":"+dst] = src
			if strings.HasPrefix(src, "./") {
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(src))); err != nil && src != "./loadtest/results" {
					t.Errorf("%s mounts %s, which is not in the repository", name, src)
				}
				if src != "./loadtest/results" && (len(parts) < 3 || parts[2] != "ro") {
					t.Errorf("%s mounts %s writable; configuration is mounted :ro", name, src)
				}
				continue
			}
			if !c.volumes[src] {
				t.Errorf("%s uses volume %s, which is not declared under volumes:", name, src)
			}
			used[src] = true
		}
	}
	for v := range c.volumes {
		if !used[v] {
			t.Errorf("volume %s is declared and never used", v)
		}
	}
	for _, want := range []string{"mysql:/var/lib/mysql", "kafka:/var/lib/kafka/data", "zookeeper:/data", "redis:/data"} {
		if src := mounts[want]; src == "" || strings.HasPrefix(src, "./") {
			t.Errorf("%s: want a named volume there, got %q", want, src)
		}
	}
}

// TestComposeRedisDurable: Redis keeps redis-lua's accepted purchases across its own crash, as
// the local stack does: the append-only file on, fsynced before each answer, in its volume.
func TestComposeRedisDurable(t *testing.T) {
	c := loadCompose(t)
	args := map[string]string{}
	cmd := c.services["redis"].command
	for i := 1; i+1 < len(cmd); i += 2 {
		args[cmd[i]] = cmd[i+1]
	}
	want := map[string]string{"--appendonly": "yes", "--appendfsync": "always", "--dir": "/data", "--save": ""}
	if diff := cmp.Diff(want, args); diff != "" || len(cmd) == 0 || cmd[0] != "redis-server" {
		t.Errorf("redis's command %q (-want +got):\n%s", cmd, diff)
	}
}

// TestComposeZooServers: the lock zoo's servers. The redlock servers keep nothing at all (no RDB
// snapshots, no append-only file, no volume): Redlock's critics' case is a server that restarts
// empty, and the redlock fault shows it. Memcached gets its memory limit. Nothing of the app waits
// for them: only the redlock and memcached strategies use them (503 while they are away), and a
// zoo server restarted for a fault demo must not hold back or take down anything else.
func TestComposeZooServers(t *testing.T) {
	c := loadCompose(t)
	for _, name := range redlockServers {
		s := c.services[name]
		if s == nil {
			t.Errorf("no service %s", name)
			continue
		}
		cmd := s.command
		args := map[string]string{}
		for i := 1; i+1 < len(cmd); i += 2 {
			args[cmd[i]] = cmd[i+1]
		}
		want := map[string]string{"--save": "", "--appendonly": "no"}
		if diff := cmp.Diff(want, args); diff != "" || len(cmd)%2 != 1 || cmd[0] != "redis-server" {
			t.Errorf("%s's command %q: want redis-server without persistence (-want +got):\n%s", name, cmd, diff)
		}
		if len(s.volumes) > 0 {
			t.Errorf("%s mounts %v: a redlock server keeps nothing across a restart", name, s.volumes)
		}
		if s.image != c.services["redis"].image {
			t.Errorf("%s runs %s, redis %s: the same server, so that redlock is measured beside the single-Redis lock", name, s.image, c.services["redis"].image)
		}
		if test := s.healthTest(); !slices.Equal(test, []string{"CMD", "redis-cli", "ping"}) {
			t.Errorf("%s: healthcheck %v, want [CMD redis-cli ping] like redis's", name, test)
		}
	}
	mc := c.services["memcached"]
	if mc == nil {
		t.Fatal("no service memcached")
	}
	if !slices.Equal(mc.command, []string{"memcached", "-m", "64"}) {
		t.Errorf("memcached's command %q, want [memcached -m 64]", mc.command)
	}
	if len(mc.volumes) > 0 {
		t.Errorf("memcached mounts %v: Memcached keeps nothing on disk", mc.volumes)
	}
	// The image has no memcached client and no bash (/dev/tcp): busybox's nc, asking a question
	// that only a serving Memcached answers, on the port the app is given.
	if test := strings.Join(mc.healthTest(), " "); !strings.Contains(test, "nc ") || !strings.Contains(test, " 11211") ||
		!strings.Contains(test, "VERSION") {
		t.Errorf("memcached: healthcheck %q, want a version request with nc on 11211", test)
	}
	for _, name := range sortedKeys(c.services) {
		for dep := range c.services[name].dependsOn {
			if slices.Contains(zooServers, dep) {
				t.Errorf("%s depends on %s: nothing waits for the lock zoo's servers (only the redlock and memcached strategies use them)", name, dep)
			}
		}
	}
}

// TestComposeKafka: KRaft, one node, topics created on purpose with the partitions the app is
// configured for.
func TestComposeKafka(t *testing.T) {
	c := loadCompose(t)
	k := c.services["kafka"].env
	if k["KAFKA_PROCESS_ROLES"] != "broker,controller" || k["KAFKA_ZOOKEEPER_CONNECT"] != "" {
		t.Errorf("KAFKA_PROCESS_ROLES=%q: want one KRaft node as broker and controller", k["KAFKA_PROCESS_ROLES"])
	}
	if id, err := base64.RawURLEncoding.DecodeString(k["CLUSTER_ID"]); err != nil || len(id) != 16 {
		t.Errorf("CLUSTER_ID %q: Kafka wants 16 bytes in URL-safe base64 without padding", k["CLUSTER_ID"])
	}
	if k["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] != "false" {
		t.Error("KAFKA_AUTO_CREATE_TOPICS_ENABLE must be false: kafka-init creates the topic with its partitions")
	}
	app := c.services["worker"]
	cfg := loadAppConfig(t, app)
	if adv := k["KAFKA_ADVERTISED_LISTENERS"]; !strings.Contains(adv, "://"+cfg.Kafka.Brokers[0]) {
		t.Errorf("Kafka advertises %q, the app bootstraps from %s: the broker would send clients elsewhere", adv, cfg.Kafka.Brokers[0])
	}
	init := c.services["kafka-init"]
	script := strings.Join(init.command, " ")
	for _, v := range []string{"SECKILL_KAFKA_BROKERS", "SECKILL_KAFKA_TOPIC", "SECKILL_KAFKA_PARTITIONS"} {
		if !strings.Contains(script, `"$`+v+`"`) {
			t.Errorf("kafka-init's command does not use $%s", v)
		}
		if init.env[v] != app.env[v] {
			t.Errorf("kafka-init has %s=%q, the app %q", v, init.env[v], app.env[v])
		}
	}
	if !strings.Contains(script, "--if-not-exists") {
		t.Error("kafka-init must be idempotent (--if-not-exists): it runs at every up")
	}
	if cfg.Kafka.Partitions < 3 {
		t.Errorf("SECKILL_KAFKA_PARTITIONS=%d: the consumers of a flash sale need partitions to share", cfg.Kafka.Partitions)
	}
}

// TestComposeObservability: Prometheus scrapes every app process that serves HTTP; Grafana finds
// the provisioned datasource and dashboards where compose mounts them.
func TestComposeObservability(t *testing.T) {
	c := loadCompose(t)
	var prom struct {
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			MetricsPath   string `yaml:"metrics_path"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	readYAML(t, "deploy/prometheus/prometheus.yml", &prom)
	var got []string
	for _, sc := range prom.ScrapeConfigs {
		if sc.MetricsPath != "" && sc.MetricsPath != "/metrics" {
			t.Errorf("job %s scrapes %s, the app serves /metrics", sc.JobName, sc.MetricsPath)
		}
		for _, st := range sc.StaticConfigs {
			for _, tg := range st.Targets {
				if host, _, _ := net.SplitHostPort(tg); host != "localhost" {
					got = append(got, tg)
				}
			}
		}
	}
	want := replicaAddrs(t, c)
	want = append(want, net.JoinHostPort("worker", appPort(t, c.services["worker"])))
	slices.Sort(want)
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Prometheus targets are not the replicas and the worker (-want +got):\n%s", diff)
	}
	for _, tg := range got {
		if _, ok := c.services[strings.Split(tg, ":")[0]]; !ok {
			t.Errorf("Prometheus target %s is no compose service", tg)
		}
	}

	var ds struct {
		Datasources []struct {
			UID, Type, URL string
		}
	}
	readYAML(t, "deploy/grafana/provisioning/datasources/prometheus.yml", &ds)
	if len(ds.Datasources) != 1 || ds.Datasources[0].URL != "http://prometheus:9090" {
		t.Errorf("Grafana datasources %+v, want one at http://prometheus:9090", ds.Datasources)
	}
	var prov struct {
		Providers []struct {
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	readYAML(t, "deploy/grafana/provisioning/dashboards/seckill.yml", &prov)
	g := c.services["grafana"]
	mounted := map[string]string{} // container path -> repo path
	for _, v := range g.volumes {
		parts := strings.Split(v, ":")
		mounted[parts[1]] = strings.TrimPrefix(parts[0], "./")
	}
	for _, p := range prov.Providers {
		if mounted[p.Options.Path] != "deploy/grafana/dashboards" {
			t.Errorf("the dashboard provider reads %s, where compose mounts %q", p.Options.Path, mounted[p.Options.Path])
		}
	}
	for _, dir := range []string{"datasources", "dashboards"} {
		if mounted["/etc/grafana/provisioning/"+dir] != "deploy/grafana/provisioning/"+dir {
			t.Errorf("compose does not mount deploy/grafana/provisioning/%s", dir)
		}
	}
	home := g.env["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
	dir, file := path.Split(home)
	if src := mounted[strings.TrimSuffix(dir, "/")]; src == "" {
		t.Errorf("home dashboard %s is not under a mount", home)
	} else if _, err := os.Stat(filepath.Join(repoRoot(t), src, file)); err != nil {
		t.Errorf("home dashboard: %v", err)
	}
}

func TestComposeEnvFileDocumented(t *testing.T) {
	c := loadCompose(t)
	env := c.services["app1"].env
	// The documented dev default (README, make up and the load test use the same token).
	if got := env["SECKILL_ADMIN_TOKEN"]; got != "dev-admin-token" {
		t.Errorf("SECKILL_ADMIN_TOKEN default %q, the documented one is dev-admin-token", got)
	}
	if !strings.Contains(string(readRepoFile(t, composeFile)), "${SECKILL_ENV_FILE:-deploy/compose.env}") {
		t.Errorf("%s must read its env file from ${SECKILL_ENV_FILE:-deploy/compose.env}", composeFile)
	}
}

const smokeOverride = "docker-compose.smoke.yml"

// TestComposeSmokeOverride: the compose smoke run's override (scripts/compose-smoke.sh) changes
// only what its header lists, so that the smoke run proves the shipped file: every third-party
// image of the default profile swapped for a stand-in the script builds (pull_policy never), every
// build of the Dockerfile given the Go stand-in of go.mod's version as GO_IMAGE and the host's
// network (same context and target), and nginx's SECKILL_LB_RESOLVER emptied. No port, command,
// healthcheck, volume or other setting.
func TestComposeSmokeOverride(t *testing.T) {
	c := loadCompose(t)
	var doc map[string]any
	readYAML(t, smokeOverride, &doc)
	for k := range doc {
		if k != "services" && !strings.HasPrefix(k, "x-") {
			t.Errorf("%s: top-level %q: only services (and x- anchors) may change", smokeOverride, k)
		}
	}
	svcs, _ := doc["services"].(map[string]any)
	goImage := "seckill-standin/golang:" + goModVersion(t)

	// The stand-ins the script builds, from its STANDINS table: [target]=image.
	built := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s*\[[a-z]+\]=(\S+)$`).FindAllStringSubmatch(string(readRepoFile(t, "scripts/compose-smoke.sh")), -1) {
		built[m[1]] = true
	}
	if len(built) == 0 {
		t.Fatal("scripts/compose-smoke.sh: no STANDINS table")
	}
	used := map[string]bool{}

	for name, s := range c.services {
		raw, swapped := svcs[name]
		o, _ := raw.(map[string]any)
		if s.buildTarget != "" {
			if !swapped {
				t.Errorf("%s: not in %s: its build would pull golang:<version>", name, smokeOverride)
				continue
			}
			want := map[string]any{"build": map[string]any{
				"context": ".", "target": s.buildTarget, "network": "host",
				"args": map[string]any{"GO_IMAGE": goImage},
			}}
			if diff := cmp.Diff(want, o); diff != "" {
				t.Errorf("%s in %s (-want +got):\n%s", name, smokeOverride, diff)
			}
			continue
		}
		if len(s.profiles) > 0 {
			if swapped {
				t.Errorf("%s (profile %v): in %s, which runs the default profile only", name, s.profiles, smokeOverride)
			}
			continue
		}
		if !swapped {
			t.Errorf("%s: image %s not swapped in %s: nothing can be pulled", name, s.image, smokeOverride)
			continue
		}
		img := scalar(o["image"])
		used[img] = true
		want := map[string]any{"image": img, "pull_policy": "never"}
		if name == "nginx" {
			want["environment"] = map[string]any{"SECKILL_LB_RESOLVER": ""}
		}
		if diff := cmp.Diff(want, o); diff != "" {
			t.Errorf("%s in %s (-want +got):\n%s", name, smokeOverride, diff)
		}
		if !built[img] {
			t.Errorf("%s: %s is not a stand-in scripts/compose-smoke.sh builds (%v)", name, img, slices.Sorted(maps.Keys(built)))
		}
	}
	for name := range svcs {
		if c.services[name] == nil {
			t.Errorf("%s: service %s is not in %s", smokeOverride, name, composeFile)
		}
	}
	for img := range built {
		if !used[img] {
			t.Errorf("scripts/compose-smoke.sh builds %s, which %s does not use", img, smokeOverride)
		}
	}
}
