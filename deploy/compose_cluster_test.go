package deploy

import (
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/seckill-go/seckill-go/internal/config"
	"github.com/seckill-go/seckill-go/internal/redisconn"
)

// The cluster form of the compose stack: docker-compose.yml's profile cluster (six Redis Cluster
// nodes and the one-shot that makes them a cluster) and docker-compose.cluster.yml, which points
// the app processes at it.
const (
	clusterOverride = "docker-compose.cluster.yml"
	clusterProfile  = "cluster"
	clusterInit     = "rc-init"
	clusterScript   = "deploy/redis/cluster-init.sh"
)

var clusterNodes = []string{"rc1", "rc2", "rc3", "rc4", "rc5", "rc6"}

// redisArgs returns the --flag value pairs of a redis-server command line.
func redisArgs(t *testing.T, who string, cmd []string) map[string]string {
	t.Helper()
	if len(cmd) == 0 || cmd[0] != "redis-server" || len(cmd)%2 != 1 {
		t.Fatalf("%s: command %q, want redis-server and --flag value pairs", who, cmd)
	}
	args := map[string]string{}
	for i := 1; i+1 < len(cmd); i += 2 {
		if !strings.HasPrefix(cmd[i], "--") {
			t.Fatalf("%s: command %q: %q is not a --flag", who, cmd, cmd[i])
		}
		args[cmd[i]] = cmd[i+1]
	}
	return args
}

// rcStartArgs reads the settings of the local stack's cluster nodes from scripts/services.sh
// (rc_start, `make up REDIS_MODE=cluster`): its --flag value pairs, a "$VAR" value replaced by
// the script's default for VAR (VAR=${SECKILL_…:-default}), without the settings that only say
// where a local node runs (daemonize, bind, port, dir). It also returns the script's CLUSTER_SIZE.
func rcStartArgs(t *testing.T) (map[string]string, int) {
	t.Helper()
	src := string(readRepoFile(t, "scripts/services.sh"))
	body := regexp.MustCompile(`(?s)\nrc_start\(\) \{\n(.*?)\n\}\n`).FindStringSubmatch(src)
	if body == nil {
		t.Fatal("scripts/services.sh: no rc_start function")
	}
	words := strings.Fields(strings.ReplaceAll(body[1], "\\\n", " "))
	args := map[string]string{}
	for i := 0; i+1 < len(words); i++ {
		flag := words[i]
		if !strings.HasPrefix(flag, "--") {
			continue
		}
		v := strings.Trim(words[i+1], `"`)
		i++
		switch flag {
		case "--daemonize", "--bind", "--port", "--dir":
			continue
		}
		if name, ok := strings.CutPrefix(v, "$"); ok {
			def := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `=\$\{\w+:-([^}]*)\}$`).FindStringSubmatch(src)
			if def == nil {
				t.Fatalf("scripts/services.sh: rc_start's %s %s: no default for %s", flag, v, name)
			}
			v = def[1]
		}
		args[flag] = v
	}
	if len(args) < 5 || args["--cluster-enabled"] != "yes" {
		t.Fatalf("scripts/services.sh: rc_start's settings %v: not a cluster node's", args)
	}
	m := regexp.MustCompile(`(?m)^CLUSTER_SIZE=(\d+)$`).FindStringSubmatch(src)
	if m == nil {
		t.Fatal("scripts/services.sh: no CLUSTER_SIZE")
	}
	n, _ := strconv.Atoi(m[1])
	return args, n
}

// TestComposeClusterNodes: the profile's six nodes run as the local stack's (rc_start's
// settings, as many nodes), the redis service's image, each with its own named volume, a PING
// healthcheck; rc-init makes them one cluster with a replica per master, only when no slot is
// assigned (else it re-introduces the nodes at their current addresses), and waits for
// cluster_state:ok.
func TestComposeClusterNodes(t *testing.T) {
	c := loadCompose(t)
	want, size := rcStartArgs(t)
	if size != len(clusterNodes) {
		t.Errorf("the local stack's cluster has %d nodes, compose's %d", size, len(clusterNodes))
	}
	want["--dir"] = "/data"
	redis := c.services["redis"]
	for _, name := range clusterNodes {
		s := c.services[name]
		if s == nil {
			t.Errorf("no service %s", name)
			continue
		}
		if !slices.Equal(s.profiles, []string{clusterProfile}) {
			t.Errorf("%s: profiles %v, want [%s]", name, s.profiles, clusterProfile)
		}
		if diff := cmp.Diff(want, redisArgs(t, name, s.command)); diff != "" {
			t.Errorf("%s's settings are not rc_start's (scripts/services.sh) (-want +got):\n%s", name, diff)
		}
		if s.image != redis.image {
			t.Errorf("%s runs %s, redis %s: the same server in both forms", name, s.image, redis.image)
		}
		// Its own named volume at /data (nodes.conf and the append-only file): `down` keeps the
		// cluster, `down -v` drops it, as redis's redis-data.
		if len(s.volumes) != 1 || s.volumes[0] != name+"-data:/data" || !c.volumes[name+"-data"] {
			t.Errorf("%s: volumes %v, want [%s-data:/data], declared", name, s.volumes, name)
		}
		if len(s.ports) > 0 {
			t.Errorf("%s: ports %v: reached on the compose network only", name, s.ports)
		}
		if test := s.healthTest(); !slices.Equal(test, []string{"CMD", "redis-cli", "ping"}) {
			t.Errorf("%s: healthcheck %v, want [CMD redis-cli ping] like redis's", name, test)
		}
		if s.restart != "unless-stopped" {
			t.Errorf("%s: restart %q, want unless-stopped: a crashed node comes back and rejoins", name, s.restart)
		}
	}

	init := c.services[clusterInit]
	if init == nil {
		t.Fatalf("no service %s", clusterInit)
	}
	if !slices.Equal(init.profiles, []string{clusterProfile}) || init.image != redis.image {
		t.Errorf("%s: profiles %v, image %s: want [%s] and redis's image (its redis-cli)", clusterInit, init.profiles, init.image, clusterProfile)
	}
	wantDeps := map[string]string{}
	var wantNodes []string
	for _, n := range clusterNodes {
		wantDeps[n] = "service_healthy"
		wantNodes = append(wantNodes, n+":6379")
	}
	if diff := cmp.Diff(wantDeps, init.dependsOn); diff != "" {
		t.Errorf("%s must start once every node answers (-want +got):\n%s", clusterInit, diff)
	}
	if got := strings.Fields(init.env["SECKILL_RC_NODES"]); !slices.Equal(got, wantNodes) {
		t.Errorf("%s: SECKILL_RC_NODES %q, want %q", clusterInit, got, wantNodes)
	}
	// The script, from the repository, where the command runs it.
	mount := map[string]string{}
	for _, v := range init.volumes {
		parts := strings.Split(v, ":")
		mount[parts[1]] = strings.TrimPrefix(parts[0], "./")
	}
	if len(init.command) != 2 || init.command[0] != "/bin/sh" {
		t.Fatalf("%s: command %q, want [/bin/sh SCRIPT]", clusterInit, init.command)
	}
	dir, file, _ := strings.Cut(strings.TrimPrefix(init.command[1], "/"), "/redis/")
	if src := mount["/"+dir+"/redis"]; src+"/"+file != clusterScript {
		t.Errorf("%s runs %s, which is not %s (mounts %v)", clusterInit, init.command[1], clusterScript, init.volumes)
	}
	script := string(readRepoFile(t, clusterScript))
	for _, want := range []string{
		"--cluster create", "--cluster-replicas 1", "--cluster-yes", // three masters, a replica each, no prompt
		"cluster_slots_assigned", // idempotent: only when no slot is assigned
		"CLUSTER MEET",           // else the nodes meet again at their current addresses
		"cluster_state",          // waits for ok
		"${SECKILL_RC_NODES:?",   // the nodes compose names
	} {
		if !strings.Contains(script, want) {
			t.Errorf("%s does not contain %q", clusterScript, want)
		}
	}
	// Nothing of the default form waits for the cluster or talks to it.
	for _, name := range sortedKeys(c.services) {
		s := c.services[name]
		if slices.Contains(s.profiles, clusterProfile) {
			continue
		}
		for dep := range s.dependsOn {
			if dep == clusterInit || slices.Contains(clusterNodes, dep) {
				t.Errorf("%s (default form) depends on %s (profile %s)", name, dep, clusterProfile)
			}
		}
	}
}

// TestComposeClusterForm: docker-compose.cluster.yml puts every process of the app image and the
// load test on the cluster (mode cluster, the six nodes as seeds, in order) and makes the
// long-running ones wait for rc-init; it changes nothing else. Without it the app stays on the
// one redis server, as before the profile existed.
func TestComposeClusterForm(t *testing.T) {
	base := loadCompose(t)
	c := loadComposeFiles(t, composeFile, clusterOverride)

	// The override itself: environment (the two Redis settings) and depends_on (rc-init) of app
	// processes and the load test, nothing else.
	var doc map[string]any
	readYAML(t, clusterOverride, &doc)
	svcs, _ := doc["services"].(map[string]any)
	apps := appServices(base)
	wantOver := slices.Sorted(maps.Keys(apps))
	wantOver = append(wantOver, "loadtest")
	slices.Sort(wantOver)
	if diff := cmp.Diff(wantOver, slices.Sorted(maps.Keys(svcs))); diff != "" {
		t.Errorf("%s: services (-want +got):\n%s", clusterOverride, diff)
	}
	for name, raw := range svcs {
		o, _ := raw.(map[string]any)
		for k, v := range o {
			switch k {
			case "environment":
				env, _ := v.(map[string]any)
				if got := slices.Sorted(maps.Keys(env)); !slices.Equal(got, []string{"SECKILL_REDIS_ADDRS", "SECKILL_REDIS_MODE"}) {
					t.Errorf("%s: %s sets %v, want SECKILL_REDIS_MODE and SECKILL_REDIS_ADDRS only", clusterOverride, name, got)
				}
			case "depends_on":
				deps, _ := v.(map[string]any)
				if got := slices.Sorted(maps.Keys(deps)); !slices.Equal(got, []string{clusterInit}) {
					t.Errorf("%s: %s depends on %v, want %s only", clusterOverride, name, got, clusterInit)
				}
			default:
				t.Errorf("%s: %s changes %s: only environment and depends_on", clusterOverride, name, k)
			}
		}
	}
	header := string(readRepoFile(t, clusterOverride))
	if !strings.Contains(header, "-f docker-compose.yml -f "+clusterOverride+" --profile "+clusterProfile+" up") {
		t.Errorf("%s: its header does not say how it is run (with --profile %s)", clusterOverride, clusterProfile)
	}

	var seeds []string
	for _, n := range clusterNodes {
		seeds = append(seeds, n+":6379")
	}
	for _, name := range sortedKeys(appServices(c)) {
		s := c.services[name]
		t.Run(name, func(t *testing.T) {
			cfg := loadAppConfig(t, s)
			topo := cfg.Redis.Topology
			if topo.Mode != redisconn.Cluster || !slices.Equal(topo.Addrs, seeds) {
				t.Errorf("cluster form: Redis topology %s, want cluster (seeds %s)", topo, strings.Join(seeds, ","))
			}
			for i, a := range topo.Addrs {
				if i < len(clusterNodes) {
					checkServiceAddr(t, c, "SECKILL_REDIS_ADDRS", a, clusterNodes[i], "6379")
				}
			}
			if cmd := s.seckillCommand(); cmd == "serve" || cmd == "worker" {
				if s.dependsOn[clusterInit] != "service_completed_successfully" {
					t.Errorf("cluster form: %s starts before %s made the cluster (depends_on %v)", name, clusterInit, s.dependsOn)
				}
			}
			// Everything else as in the default form.
			b := base.services[name]
			for k, v := range b.env {
				if s.env[k] != v {
					t.Errorf("cluster form: %s=%q, default form %q: the override changes only the Redis topology", k, s.env[k], v)
				}
			}
			for dep, cond := range b.dependsOn {
				if s.dependsOn[dep] != cond {
					t.Errorf("cluster form: depends_on %s %q, default form %q", dep, s.dependsOn[dep], cond)
				}
			}

			// The default form: one server, redis:6379, no cluster setting.
			dcfg := loadAppConfig(t, b)
			if dt := dcfg.Redis.Topology; dt.Mode != redisconn.Single || !slices.Equal(dt.Addrs, []string{"redis:6379"}) {
				t.Errorf("default form: Redis topology %s, want single (redis:6379)", dt)
			}
		})
	}
	lt := c.services["loadtest"]
	topo, err := config.RedisTopology(func(k string) string { return lt.env[k] })
	if err != nil || topo.Mode != redisconn.Cluster || !slices.Equal(topo.Addrs, seeds) {
		t.Errorf("cluster form: the load test's Redis %s (%v), want cluster (seeds %s)", topo, err, strings.Join(seeds, ","))
	}

	// Start order in the cluster form: what the default form checks, plus rc-init's nodes. A
	// service of the default form may depend on rc-init (profile cluster) here only: the header
	// says to run the form with --profile cluster.
	for _, name := range sortedKeys(c.services) {
		for dep, cond := range c.services[name].dependsOn {
			d := c.services[dep]
			if d == nil {
				t.Errorf("cluster form: %s depends on %s, which does not exist", name, dep)
				continue
			}
			if len(d.profiles) > 0 && !slices.Equal(d.profiles, c.services[name].profiles) && !slices.Equal(d.profiles, []string{clusterProfile}) {
				t.Errorf("cluster form: %s depends on %s, which runs only with profile %v", name, dep, d.profiles)
			}
			if cond == "service_completed_successfully" && !slices.Contains(oneShots, dep) {
				t.Errorf("cluster form: %s waits for %s to complete, which is not a one-shot", name, dep)
			}
		}
	}
}
