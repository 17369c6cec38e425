// Package deploy holds the deployment files of seckill-go (docker-compose.yml and the Dockerfile
// at the repository root, and nginx, Prometheus and Grafana configuration here) and, in its
// tests, the checks that can be made of them without a Docker engine:
//
//   - compose_test.go: every app process gets the settings the app needs, pointing at compose
//     services; every service has a healthcheck or is a one-shot; start order; ports; nginx's
//     upstreams and Prometheus's targets are the app services.
//   - compose_cluster_test.go: the profile cluster's Redis Cluster nodes run with the local
//     stack's settings (scripts/services.sh, rc_start), rc-init creates the cluster once, and
//     docker-compose.cluster.yml puts every app process on it and changes nothing else.
//   - docker_test.go: the Dockerfile builds with the Makefile's release flags and go.mod's Go, the
//     runtime stage holds only the binary, its probe and CA roots, runs as non-root and probes
//     /healthz; .dockerignore keeps every file the build needs.
//   - dashboard_test.go: the Grafana dashboard is valid, names the provisioned datasource, and
//     every metric its PromQL reads is exported by the real app (started in-process against the
//     local services).
//   - nginx_test.go: the compose rendering of the shared nginx template, run by a real nginx when
//     one is installed.
//
// The package has no non-test code; it must never be imported.
package deploy

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

// repoRoot returns the repository root (tests run in deploy/).
func repoRoot(tb testing.TB) string {
	tb.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		tb.Fatalf("repository root not found from %s: %v", root, err)
	}
	return root
}

// readRepoFile returns a file of the repository, by its slash-separated path from the root.
func readRepoFile(tb testing.TB, path string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(tb), filepath.FromSlash(path)))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// readYAML decodes a YAML file of the repository into v.
func readYAML(tb testing.TB, path string, v any) {
	tb.Helper()
	if err := yaml.Unmarshal(readRepoFile(tb, path), v); err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
}

// interpolate applies Compose's variable substitution to s with the variables in vars:
// $$ is a literal $, ${VAR}, $VAR, ${VAR:-default}, ${VAR-default}, ${VAR:?error}, ${VAR?error}.
func interpolate(s string, vars map[string]string) (string, error) {
	var out strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' {
			out.WriteByte(s[i])
			continue
		}
		switch {
		case i+1 < len(s) && s[i+1] == '$':
			out.WriteByte('$')
			i++
		case i+1 < len(s) && s[i+1] == '{':
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return "", fmt.Errorf("unterminated ${ in %q", s)
			}
			expr := s[i+2 : i+end]
			v, err := substitute(expr, vars)
			if err != nil {
				return "", fmt.Errorf("%q: %w", s, err)
			}
			out.WriteString(v)
			i += end
		default:
			j := i + 1
			for j < len(s) && (s[j] == '_' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= 'a' && s[j] <= 'z' || j > i+1 && s[j] >= '0' && s[j] <= '9') {
				j++
			}
			if j == i+1 {
				return "", fmt.Errorf("lone $ in %q (write $$ for a literal $)", s)
			}
			out.WriteString(vars[s[i+1:j]])
			i = j - 1
		}
	}
	return out.String(), nil
}

func substitute(expr string, vars map[string]string) (string, error) {
	for _, op := range []string{":-", ":?", "-", "?"} {
		name, arg, ok := strings.Cut(expr, op)
		if !ok {
			continue
		}
		v, set := vars[name]
		empty := !set || (strings.HasPrefix(op, ":") && v == "")
		switch {
		case !empty:
			return v, nil
		case strings.HasSuffix(op, "-"):
			return arg, nil
		default:
			return "", fmt.Errorf("${%s}: %s", expr, arg)
		}
	}
	return vars[expr], nil
}

// interpolateTree applies interpolate to every string of a decoded YAML document.
func interpolateTree(v any, vars map[string]string) (any, error) {
	switch t := v.(type) {
	case string:
		return interpolate(t, vars)
	case map[string]any:
		for k, e := range t {
			r, err := interpolateTree(e, vars)
			if err != nil {
				return nil, err
			}
			t[k] = r
		}
	case []any:
		for i, e := range t {
			r, err := interpolateTree(e, vars)
			if err != nil {
				return nil, err
			}
			t[i] = r
		}
	}
	return v, nil
}

// parseEnvFile reads KEY=VALUE lines as Compose does: blank lines and lines starting with # are
// skipped; there are no quotes to strip and nothing to interpolate (deploy/compose.env uses
// neither, so that Compose v1 and v2 read it alike: checked here).
func parseEnvFile(tb testing.TB, path string) map[string]string {
	tb.Helper()
	env := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(readRepoFile(tb, path)))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		switch {
		case !ok || k == "" || strings.ContainsAny(k, " \t"):
			tb.Errorf("%s:%d: want KEY=VALUE, got %q", path, n, line)
		case strings.ContainsAny(v, `"'$`) || strings.Contains(v, " #"):
			tb.Errorf("%s:%d: %s: no quotes, $ or inline comments (Compose v1 and v2 read them differently)", path, n, k)
		case env[k] != "":
			tb.Errorf("%s:%d: %s set twice", path, n, k)
		}
		env[k] = v
	}
	return env
}

// scalar renders a YAML scalar as Compose does for environment values and the like.
func scalar(v any) string {
	switch t := v.(type) {
	case nil:
		return ""
	case string:
		return t
	default:
		return fmt.Sprint(t)
	}
}

// strs turns a YAML string-or-list into a list; a string is split on blanks, as Compose does for
// a command given as one string.
func strs(v any) []string {
	switch t := v.(type) {
	case nil:
		return nil
	case string:
		return strings.Fields(t)
	case []any:
		out := make([]string, len(t))
		for i, e := range t {
			out[i] = scalar(e)
		}
		return out
	}
	return []string{fmt.Sprint(v)}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func TestInterpolate(t *testing.T) {
	vars := map[string]string{"SET": "x", "EMPTY": ""}
	for _, tc := range []struct {
		in, want, wantErr string
	}{
		{in: "plain", want: "plain"},
		{in: "$$HOME and $$$$", want: "$HOME and $$"},
		{in: "${SET}/$SET/${UNSET}", want: "x/x/"},
		{in: "${UNSET:-deploy/compose.env}", want: "deploy/compose.env"},
		{in: "${EMPTY:-d} ${EMPTY-d} ${UNSET-d}", want: "d  d"},
		{in: "${SET:-d}", want: "x"},
		{in: "${UNSET:?set it}", wantErr: "set it"},
		{in: "${EMPTY?set it}", want: ""},
		{in: "a $ b", wantErr: "lone $"},
		{in: "${OPEN", wantErr: "unterminated"},
	} {
		got, err := interpolate(tc.in, vars)
		switch {
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("interpolate(%q) error = %v, want %q", tc.in, err, tc.wantErr)
		case tc.wantErr == "" && (err != nil || got != tc.want):
			t.Errorf("interpolate(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}
