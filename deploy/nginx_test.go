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
			if !strings.Contains(conf, "listen "+ng.env["SECKILL_LB_LISTEN"]+";") {
				t.Errorf("the config does not listen on SECKILL_LB_LISTEN=%s", ng.env["SECKILL_LB_LISTEN"])
			}
			tmpl := string(readRepoFile(t, "deploy/nginx/nginx.conf.tmpl"))
			if got, want := strings.Count(conf, "\n"), strings.Count(tmpl, "\n")+1; got != want {
				t.Errorf("rendered %d lines from a %d-line template (+1 header)", got, want-1)
			}
		})
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
func TestNginxComposeRuns(t *testing.T) {
	nginx, err := exec.LookPath("nginx")
	if err != nil {
		if _, err := os.Stat("/usr/sbin/nginx"); err != nil {
			t.Skip("nginx is not installed (make up installs it)")
		}
		nginx = "/usr/sbin/nginx"
	}
	replica := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "replica %s rid=%s", r.URL.Path, r.Header.Get("X-Request-ID"))
	}))
	defer replica.Close()

	// Workers run as nobody when the test runs as root: the prefix must be reachable for them.
	prefix, err := os.MkdirTemp("", "seckill-nginx-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(prefix)
	if err := os.Chmod(prefix, 0o755); err != nil {
		t.Fatal(err)
	}
	listen := "127.0.0.1:" + strconv.Itoa(itest.FreePort(t))

	cmd := exec.Command("sh", filepath.Join(repoRoot(t), nginxScript))
	cmd.Env = []string{
		"PATH=" + filepath.Dir(nginx) + ":" + os.Getenv("PATH"),
		"SECKILL_NGINX_PREFIX=" + prefix,
		"SECKILL_LB_LISTEN=" + listen,
		"SECKILL_LB_UPSTREAMS=" + strings.TrimPrefix(replica.URL, "http://"),
	}
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM) // the script exec'd nginx: this is its master
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			t.Error("nginx did not stop on SIGTERM")
		}
	}()

	var body string
	deadline := time.Now().Add(15 * time.Second)
	for {
		req, _ := http.NewRequest(http.MethodGet, "http://"+listen+"/healthz", nil)
		req.Header.Set("X-Request-ID", "rid-42")
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				body = string(b)
				break
			}
			err = fmt.Errorf("%s", res.Status)
		}
		select {
		case werr := <-exited:
			t.Fatalf("the script exited (%v) before nginx answered:\n%s", werr, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx on %s did not answer: %v\n%s", listen, err, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if body != "replica /healthz rid=rid-42" {
		t.Errorf("through nginx: %q, want the replica's answer with the request id passed on", body)
	}
	for _, link := range []string{"logs/access.log", "logs/error.log"} {
		if dst, err := os.Readlink(filepath.Join(prefix, link)); err != nil || !strings.HasPrefix(dst, "/dev/std") {
			t.Errorf("%s -> %q, %v: want the container's stdout/stderr", link, dst, err)
		}
	}
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
