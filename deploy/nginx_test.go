package deploy

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/seckill-go/seckill-go/internal/itest"
)

const nginxScript = "deploy/nginx/compose-nginx.sh"

// shells returns the POSIX shells to run the render script with: sh, and busybox's (the nginx
// image is Alpine) when it is installed.
func shells(t *testing.T) [][]string {
	t.Helper()
	var out [][]string
	if sh, err := exec.LookPath("sh"); err == nil {
		out = append(out, []string{sh})
	}
	if bb, err := exec.LookPath("busybox"); err == nil {
		out = append(out, []string{bb, "sh"})
	}
	if len(out) == 0 {
		t.Skip("no sh")
	}
	return out
}

// renderNginx runs the render script with exactly env (and PATH) and returns its output.
func renderNginx(t *testing.T, shell []string, env map[string]string) (string, error) {
	t.Helper()
	args := append(slices.Clone(shell[1:]), filepath.Join(repoRoot(t), nginxScript), "render")
	cmd := exec.Command(shell[0], args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%v: %s", err, stderr.String())
	}
	return string(out), nil
}

// upstreamBlock returns the directives of the `upstream seckill { ... }` block, one per entry.
func upstreamBlock(t *testing.T, conf string) []string {
	t.Helper()
	m := regexp.MustCompile(`(?s)upstream seckill \{(.*?)\}`).FindStringSubmatch(conf)
	if m == nil {
		t.Fatalf("no upstream seckill block in:\n%s", conf)
	}
	var out []string
	for _, d := range strings.Split(m[1], ";") {
		if d = strings.Join(strings.Fields(d), " "); d != "" {
			out = append(out, d)
		}
	}
	return out
}

// TestNginxComposeRender: what the nginx service renders from the shared template balances over
// exactly the API replicas of docker-compose.yml, on their ports, and listens where compose
// publishes.
func TestNginxComposeRender(t *testing.T) {
	c := loadCompose(t)
	ng := c.services["nginx"]

	// The service runs the script from the mounted deploy/nginx, which holds the template too.
	mountDir := ""
	for _, v := range ng.volumes {
		if parts := strings.Split(v, ":"); parts[0] == "./deploy/nginx" {
			mountDir = parts[1]
		}
	}
	if want := []string{"/bin/sh", mountDir + "/compose-nginx.sh"}; mountDir == "" || !slices.Equal(ng.command, want) {
		t.Errorf("nginx command %v with deploy/nginx mounted at %q; want %v", ng.command, mountDir, want)
	}

	var want []string
	resolve := ""
	if ng.env["SECKILL_LB_RESOLVER"] != "" {
		// "server ... resolve" is in open-source nginx since 1.27.3.
		if v := imageVersion(t, ng.image); !versionAtLeast(v, 1, 27, 3) {
			t.Errorf("SECKILL_LB_RESOLVER needs nginx >= 1.27.3, the image is %s", ng.image)
		}
		want = append(want, "zone seckill_upstreams 64k", "resolver "+ng.env["SECKILL_LB_RESOLVER"]+" valid=5s ipv6=off")
		resolve = " resolve"
	}
	want = append([]string{"least_conn"}, want...)
	for _, a := range replicaAddrs(t, c) {
		want = append(want, "server "+a+resolve)
	}
	want = append(want, "keepalive 64")

	for _, sh := range shells(t) {
		t.Run(strings.Join(sh, " "), func(t *testing.T) {
			conf, err := renderNginx(t, sh, ng.env)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(conf, "__LISTEN__") || strings.Contains(conf, "__UPSTREAM_SERVERS__") {
				t.Error("a placeholder is left in the rendered config")
			}
			if diff := cmp.Diff(want, upstreamBlock(t, conf)); diff != "" {
				t.Errorf("upstream block (-want +got):\n%s", diff)
			}
			for _, v := range []string{"SECKILL_LB_LISTEN", "SECKILL_LB_OPS_LISTEN"} {
				if ng.env[v] == "" || !strings.Contains(conf, "listen "+ng.env[v]+";") {
					t.Errorf("the config does not listen on %s=%s", v, ng.env[v])
				}
			}
			tmpl := string(readRepoFile(t, "deploy/nginx/nginx.conf.tmpl"))
			if got, want := strings.Count(conf, "\n"), strings.Count(tmpl, "\n")+1; got != want {
				t.Errorf("rendered %d lines from a %d-line template (+1 header)", got, want-1)
			}
			checkNginxReadPath(t, conf, ng.env["SECKILL_LB_LISTEN"], ng.env["SECKILL_LB_OPS_LISTEN"])
			checkNginxErrorPages(t, conf)
			checkComposeNofile(t, conf)
		})
	}
}

// checkComposeNofile: the nginx container's open-file limit lets the workers take what conf's
// worker_rlimit_nofile asks for. Docker gives no CAP_SYS_RESOURCE, so a worker cannot go above
// the container's hard limit, and the engine's default differs from host to host.
func checkComposeNofile(t *testing.T, conf string) {
	t.Helper()
	root, err := parseNginxConf(conf)
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	if a := effective("worker_rlimit_nofile", root); len(a) == 1 {
		want, _ = strconv.Atoi(a[0])
	}
	var doc map[string]any
	readYAML(t, composeFile, &doc)
	svcs, _ := doc["services"].(map[string]any)
	ng, _ := svcs["nginx"].(map[string]any)
	ulimits, _ := ng["ulimits"].(map[string]any)
	// "nofile: N" sets both, "nofile: {soft: N, hard: M}" each.
	atoi := func(v any) int { n, _ := strconv.Atoi(fmt.Sprint(v)); return n }
	nofile := ulimits["nofile"]
	soft, hard := atoi(nofile), atoi(nofile)
	if m, ok := nofile.(map[string]any); ok {
		soft, hard = atoi(m["soft"]), atoi(m["hard"])
	}
	if soft < want || hard < want {
		t.Errorf("%s: nginx's ulimits nofile soft %d hard %d, want both >= worker_rlimit_nofile %d", composeFile, soft, hard, want)
	}
}

func TestNginxComposeRenderRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
	}{
		{"no upstreams", map[string]string{}},
		{"no port", map[string]string{"SECKILL_LB_UPSTREAMS": "app1"}},
		{"sed metacharacters", map[string]string{"SECKILL_LB_UPSTREAMS": "app1:8080|x"}},
		{"directive injection", map[string]string{"SECKILL_LB_UPSTREAMS": "app1:8080;evil"}},
		{"bad listen", map[string]string{"SECKILL_LB_UPSTREAMS": "app1:8080", "SECKILL_LB_LISTEN": "80 ssl"}},
		{"bad resolver", map[string]string{"SECKILL_LB_UPSTREAMS": "app1:8080", "SECKILL_LB_RESOLVER": "1.1.1.1 valid=1s"}},
		{"bad ops listen", map[string]string{"SECKILL_LB_UPSTREAMS": "app1:8080", "SECKILL_LB_OPS_LISTEN": "8079;evil"}},
		{"ops listen is the public one", map[string]string{"SECKILL_LB_UPSTREAMS": "app1:8080", "SECKILL_LB_LISTEN": "9000", "SECKILL_LB_OPS_LISTEN": "9000"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, sh := range shells(t) {
				if out, err := renderNginx(t, sh, tc.env); err == nil {
					t.Errorf("%s rendered:\n%s", sh, out)
				}
			}
		})
	}
}

// TestNginxComposeRuns runs the script as the container does (render, check, exec nginx) with a
// real nginx in front of a stand-in replica, when nginx is installed (`make up` installs it).
// Without Docker the replicas' compose names do not resolve here, so the upstream is a local
// address and SECKILL_LB_RESOLVER stays unset (Debian's nginx predates "server ... resolve").
//
// The public server passes the buyers' API to the replica (the request id and X-Forwarded-For
// with the client appended) and refuses the operations surface, /metrics, /readyz and the admin
// API, whatever the spelling of the path, with the API's 404 JSON error and without asking the
// replica; the operations server passes everything.
func TestNginxComposeRuns(t *testing.T) {
	var mu sync.Mutex
	var seen []string // the paths the replica was asked for
	replica := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.Path)
		mu.Unlock()
		fmt.Fprintf(w, "replica %s rid=%s xff=%s", r.URL.Path, r.Header.Get("X-Request-ID"), r.Header.Get("X-Forwarded-For"))
	}))
	defer replica.Close()
	replicaSaw := func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := seen
		seen = nil
		return out
	}
	ng := startNginx(t, "", replica.URL)
	listen, opsListen, prefix := ng.public, ng.ops, ng.prefix

	// ask sends one request through nginx at addr and returns the status, the content type and
	// the body.
	ask := func(method, addr, path string) (int, string, string, error) {
		req, err := http.NewRequest(method, "http://"+addr+path, nil)
		if err != nil {
			return 0, "", "", err
		}
		req.Header.Set("X-Request-ID", "rid-42")
		req.Header.Set("X-Forwarded-For", "203.0.113.9")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", "", err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		return res.StatusCode, res.Header.Get("Content-Type"), string(b), err
	}

	code, _, body, err := ask(http.MethodGet, listen, "/healthz")
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /healthz through nginx: %d %q, %v\n%s", code, body, err, ng.logs.String())
	}
	replicaSaw()

	// Passed on by both servers: the client's address appended to X-Forwarded-For (the app
	// trusts it only from configured proxies), the request id kept.
	for _, addr := range []string{listen, opsListen} {
		for _, path := range []string{"/", "/healthz", "/api/v1/products", "/api/v1/products/1/purchase", "/api/v1/orders/x", "/api/v1/administrator", "/readyzz", "/static/app.js"} {
			code, _, body, err := ask(http.MethodGet, addr, path)
			want := "replica " + path + " rid=rid-42 xff=203.0.113.9, 127.0.0.1"
			if err != nil || code != http.StatusOK || body != want {
				t.Errorf("GET %s%s: %d %q, %v; want 200 %q", addr, path, code, body, err, want)
			}
		}
	}
	replicaSaw()

	// The operations surface, as a client may spell it: what the replica sees is the path it
	// routes on.
	ops := []struct{ path, routed string }{
		{"/metrics", "/metrics"},
		{"/metrics/", "/metrics/"},
		{"/readyz", "/readyz"},
		{"/readyz/details", "/readyz/details"},
		{"/readyz?verbose=1", "/readyz"},
		{"/api/v1/admin", "/api/v1/admin"},
		{"/api/v1/admin/products", "/api/v1/admin/products"},
		{"/api/v1/admin/products/1/stampede", "/api/v1/admin/products/1/stampede"},
		{"/api/v1/admin/stampedes/abc/events", "/api/v1/admin/stampedes/abc/events"},
		{"/api/v1/%61dmin/products", "/api/v1/admin/products"},
		{"/%6Detrics", "/metrics"},
		{"//metrics", "//metrics"},
		{"/api//v1/admin/products", "/api//v1/admin/products"},
		{"/api/v1/products/../admin/products", "/api/v1/products/../admin/products"},
	}
	for _, tc := range ops {
		for _, method := range []string{http.MethodGet, http.MethodHead, http.MethodPost} {
			code, ctype, body, err := ask(method, listen, tc.path)
			if err != nil {
				t.Errorf("%s public %s: %v", method, tc.path, err)
				continue
			}
			if code != http.StatusNotFound || ctype != "application/json; charset=utf-8" {
				t.Errorf("%s public %s: %d %s %q; want the operations surface refused, 404 as the app's JSON", method, tc.path, code, ctype, body)
			}
			if method != http.MethodHead && body != `{"error":{"code":"not_found","message":"no such endpoint"}}` {
				t.Errorf("%s public %s: body %q, want the API's not_found error", method, tc.path, body)
			}
		}
		if saw := replicaSaw(); len(saw) > 0 {
			t.Errorf("public %s reached the replica as %q", tc.path, saw)
		}

		code, _, body, err := ask(http.MethodGet, opsListen, tc.path)
		if err != nil || code != http.StatusOK || !strings.HasPrefix(body, "replica ") {
			t.Errorf("GET operations %s: %d %q, %v; want the replica's answer", tc.path, code, body, err)
		}
		if saw := replicaSaw(); !slices.Equal(saw, []string{tc.routed}) {
			t.Errorf("GET operations %s: the replica saw %q, want [%q]", tc.path, saw, tc.routed)
		}
	}
	for _, link := range []string{"logs/access.log", "logs/error.log"} {
		if dst, err := os.Readlink(filepath.Join(prefix, link)); err != nil || !strings.HasPrefix(dst, "/dev/std") {
			t.Errorf("%s -> %q, %v: want the container's stdout/stderr", link, dst, err)
		}
	}
}

// nginxServer is a real nginx, run by compose-nginx.sh as the container runs it.
type nginxServer struct {
	public, ops string // HOST:PORT of the public server and of the operations server
	prefix      string // nginx's prefix: nginx.conf, logs/, temp/ (the cache in temp/cache)
	logs        *syncBuffer
}

// startNginx runs compose-nginx.sh (render, check, exec nginx in the foreground) in front of the
// replicas at upstreams (URLs or HOST:PORT) and returns once it answers;
// the test's cleanup stops nginx. template is the template to render, "" for the repository's
// (a test gives an edited copy to show that a directive matters). It skips the test when nginx
// is not installed (`make up` installs it).
func startNginx(tb testing.TB, template string, upstreams ...string) *nginxServer {
	tb.Helper()
	nginx, err := exec.LookPath("nginx")
	if err != nil {
		if _, err := os.Stat("/usr/sbin/nginx"); err != nil {
			tb.Skip("nginx is not installed (make up installs it)")
		}
		nginx = "/usr/sbin/nginx"
	}

	// Workers run as nobody when the test runs as root: the prefix must be reachable for them
	// (t.TempDir's parent is not), as the cache in temp/cache is theirs to write.
	prefix, err := os.MkdirTemp("", "seckill-nginx-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(prefix) })
	if err := os.Chmod(prefix, 0o755); err != nil {
		tb.Fatal(err)
	}
	ng := &nginxServer{
		public: "127.0.0.1:" + strconv.Itoa(itest.FreePort(tb)),
		ops:    "127.0.0.1:" + strconv.Itoa(itest.FreePort(tb)),
		prefix: prefix,
		logs:   &syncBuffer{},
	}
	var addrs []string
	for _, u := range upstreams {
		addrs = append(addrs, strings.TrimPrefix(u, "http://"))
	}

	cmd := exec.Command("sh", filepath.Join(repoRoot(tb), nginxScript))
	cmd.Env = []string{
		"PATH=" + filepath.Dir(nginx) + ":" + os.Getenv("PATH"),
		"SECKILL_NGINX_PREFIX=" + prefix,
		"SECKILL_LB_LISTEN=" + ng.public,
		"SECKILL_LB_OPS_LISTEN=" + ng.ops,
		"SECKILL_LB_UPSTREAMS=" + strings.Join(addrs, " "),
	}
	if template != "" {
		cmd.Env = append(cmd.Env, "SECKILL_NGINX_TEMPLATE="+template)
	}
	cmd.Stdout, cmd.Stderr = ng.logs, ng.logs
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	tb.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM) // the script exec'd nginx: this is its master
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			tb.Error("nginx did not stop on SIGTERM")
		}
	})

	// Ready when the public server answers HTTP: `nginx -t` in the script binds the ports too, and
	// a connection it accepted is reset. /metrics is answered by nginx itself (the public server
	// refuses it): the probe costs the replicas nothing. The operations server is bound by then.
	probe := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(15 * time.Second)
	for {
		res, err := probe.Get("http://" + ng.public + "/metrics")
		if err == nil {
			res.Body.Close()
			break
		}
		select {
		case werr := <-exited:
			tb.Fatalf("the script exited (%v) before nginx answered:\n%s", werr, ng.logs.String())
		default:
		}
		if time.Now().After(deadline) {
			tb.Fatalf("nginx on %s does not answer: %v\n%s", ng.public, err, ng.logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	probe.CloseIdleConnections()
	return ng
}

// editedTemplate writes a copy of the repository's template with old replaced by new (which
// must be there) and returns its path.
func editedTemplate(tb testing.TB, old, new string) string {
	tb.Helper()
	tmpl := string(readRepoFile(tb, "deploy/nginx/nginx.conf.tmpl"))
	if !strings.Contains(tmpl, old) {
		tb.Fatalf("the template has no %q", old)
	}
	path := filepath.Join(tb.TempDir(), "nginx.conf.tmpl")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(tmpl, old, new)), 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}

// syncBuffer collects a process's output while the test may read it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// imageVersion returns the numeric version at the start of an image's tag ("1.30.4" of
// "nginx:1.30.4-alpine").
func imageVersion(t *testing.T, image string) []int {
	t.Helper()
	_, tag, _ := strings.Cut(image, ":")
	m := regexp.MustCompile(`^v?(\d+)\.(\d+)\.(\d+)`).FindStringSubmatch(tag)
	if m == nil {
		t.Fatalf("image %s: no X.Y.Z version in its tag", image)
	}
	v := make([]int, 3)
	for i := range v {
		v[i], _ = strconv.Atoi(m[i+1])
	}
	return v
}

func versionAtLeast(v []int, want ...int) bool {
	return slices.Compare(v, want) >= 0
}
