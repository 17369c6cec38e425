package deploy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	line int
	cmd  string // upper case: FROM, RUN, COPY, ...
	args string
}

// stage is one FROM of a multi-stage Dockerfile.
type stage struct {
	name, base string
	instrs     []instruction
}

// dockerfile is the parsed Dockerfile: its global ARGs (before the first FROM) and its stages.
type dockerfile struct {
	args   map[string]string
	stages []*stage
}

func (d *dockerfile) stage(name string) *stage {
	for _, s := range d.stages {
		if s.name == name {
			return s
		}
	}
	return nil
}

func parseDockerfile(tb testing.TB) *dockerfile {
	tb.Helper()
	d := &dockerfile{args: map[string]string{}}
	sc := bufio.NewScanner(bytes.NewReader(readRepoFile(tb, "Dockerfile")))
	var cur strings.Builder
	start := 0
	flush := func() {
		text := strings.TrimSpace(cur.String())
		cur.Reset()
		if text == "" {
			return
		}
		cmd, args, _ := strings.Cut(text, " ")
		in := instruction{line: start, cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)}
		switch {
		case in.cmd == "FROM":
			f := strings.Fields(in.args)
			st := &stage{base: expandArgs(tb, f[0], d.args)}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.name = f[2]
			} else if len(f) != 1 {
				tb.Fatalf("Dockerfile:%d: FROM %s: want IMAGE [AS NAME]", in.line, in.args)
			}
			d.stages = append(d.stages, st)
		case len(d.stages) == 0 && in.cmd == "ARG":
			k, v, _ := strings.Cut(in.args, "=")
			d.args[k] = expandArgs(tb, v, d.args) // a default may use the ARGs before it
		case len(d.stages) == 0:
			tb.Fatalf("Dockerfile:%d: %s before the first FROM", in.line, in.cmd)
		default:
			st := d.stages[len(d.stages)-1]
			st.instrs = append(st.instrs, in)
		}
	}
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || (line == "" && cur.Len() > 0) {
			continue // comments (and directives) are dropped, also inside a continuation
		}
		if cur.Len() == 0 {
			start = n
		}
		if body, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(body + " ")
			continue
		}
		cur.WriteString(line)
		flush()
	}
	flush()
	if len(d.stages) == 0 {
		tb.Fatal("Dockerfile: no FROM")
	}
	return d
}

// expandArgs substitutes ${NAME} and $NAME with the Dockerfile's global ARG defaults.
func expandArgs(tb testing.TB, s string, args map[string]string) string {
	tb.Helper()
	out, err := interpolate(s, args)
	if err != nil {
		tb.Fatalf("Dockerfile: %v", err)
	}
	return out
}

// shellFields splits a shell command line into words: quotes and backslashes as sh does, no
// expansions. Operators (&&, ||, ;) must stand apart to be seen as words of their own.
func shellFields(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case c == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("unterminated ' in %q", s)
			}
			w.WriteString(s[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte(`"\$`+"`", s[i+1]) >= 0 {
					i++
				}
				w.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("unterminated \" in %q", s)
			}
			inWord = true
		case c == '\\' && i+1 < len(s):
			i++
			w.WriteByte(s[i])
			inWord = true
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// makeVar returns the shell words of a `NAME := value` line of the Makefile.
func makeVar(tb testing.TB, name string) []string {
	tb.Helper()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `\s*:?=\s*(.*?)\s*$`)
	m := re.FindSubmatch(readRepoFile(tb, "Makefile"))
	if m == nil {
		tb.Fatalf("Makefile: no %s", name)
	}
	words, err := shellFields(string(m[1]))
	if err != nil || len(words) == 0 {
		tb.Fatalf("Makefile: %s: %q %v", name, m[1], err)
	}
	return words
}

// goBuild is one `go build` command of a RUN instruction.
type goBuild struct {
	line       int
	env, flags []string
	out, pkg   string
}

// goBuilds returns the `go build` commands of a stage's RUN instructions.
func goBuilds(tb testing.TB, st *stage) []goBuild {
	tb.Helper()
	var out []goBuild
	for _, in := range st.instrs {
		if in.cmd != "RUN" {
			continue
		}
		words, err := shellFields(in.args)
		if err != nil {
			tb.Fatalf("Dockerfile:%d: %v", in.line, err)
		}
		for len(words) > 0 && strings.HasPrefix(words[0], "--") { // RUN --mount=...
			words = words[1:]
		}
		for _, cmd := range splitCommands(words) {
			var env []string
			for len(cmd) > 0 && regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`).MatchString(cmd[0]) {
				env, cmd = append(env, cmd[0]), cmd[1:]
			}
			if len(cmd) < 2 || cmd[0] != "go" || cmd[1] != "build" {
				continue
			}
			b := goBuild{line: in.line, env: env}
			args := cmd[2:]
			i := slices.Index(args, "-o")
			if i < 0 || len(args) != i+3 {
				tb.Errorf("Dockerfile:%d: go build %v: want FLAGS... -o OUT PACKAGE", in.line, args)
				continue
			}
			b.flags, b.out, b.pkg = args[:i], args[i+1], args[i+2]
			out = append(out, b)
		}
	}
	return out
}

func splitCommands(words []string) [][]string {
	var cmds [][]string
	var cur []string
	for _, w := range words {
		if w == "&&" || w == "||" || w == ";" {
			cmds, cur = append(cmds, cur), nil
			continue
		}
		cur = append(cur, w)
	}
	return append(cmds, cur)
}

// TestDockerfileBuildsWhatCIBuilds: every `go build` of the Dockerfile uses exactly the Makefile's
// release flags (which `make build` uses), and the builder runs go.mod's Go.
func TestDockerfileBuildsWhatCIBuilds(t *testing.T) {
	wantEnv := makeVar(t, "GO_BUILD_ENV")
	wantFlags := makeVar(t, "GO_BUILD_FLAGS")
	if mk := string(readRepoFile(t, "Makefile")); !strings.Contains(mk, "$(GO_BUILD_ENV) $(GO) build $(GO_BUILD_FLAGS) -o bin/seckill ./cmd/seckill") {
		t.Error("Makefile: `make build` no longer builds bin/seckill with GO_BUILD_ENV and GO_BUILD_FLAGS; update this test with it")
	}
	d := parseDockerfile(t)
	built := map[string]string{} // package -> output
	for _, st := range d.stages {
		for _, b := range goBuilds(t, st) {
			built[b.pkg] = b.out
			env := slices.Clone(b.env)
			slices.Sort(env)
			want := slices.Clone(wantEnv)
			slices.Sort(want)
			if !slices.Equal(env, want) {
				t.Errorf("Dockerfile:%d: go build %s with env %q, the Makefile's GO_BUILD_ENV is %q", b.line, b.pkg, b.env, wantEnv)
			}
			if !slices.Equal(b.flags, wantFlags) {
				t.Errorf("Dockerfile:%d: go build %s with flags %q, the Makefile's GO_BUILD_FLAGS is %q", b.line, b.pkg, b.flags, wantFlags)
			}
		}
	}
	for _, pkg := range []string{"./cmd/seckill", "./deploy/healthcheck", "./loadtest"} {
		if built[pkg] == "" {
			t.Errorf("Dockerfile builds no %s", pkg)
		}
	}

	wantGo := goModVersion(t)
	build := d.stage("build")
	if build == nil {
		t.Fatal("Dockerfile: no stage named build")
	}
	if !strings.HasPrefix(build.base, "golang:"+wantGo+"-") && build.base != "golang:"+wantGo {
		t.Errorf("the build stage is FROM %s; go.mod wants Go %s (the golang image does not download toolchains)", build.base, wantGo)
	}
}

// goModVersion returns the Go that go.mod names: its toolchain line's, else its go line's.
func goModVersion(tb testing.TB) string {
	tb.Helper()
	goMod := string(readRepoFile(tb, "go.mod"))
	if tc := regexp.MustCompile(`(?m)^toolchain go(\S+)$`).FindStringSubmatch(goMod); tc != nil {
		return tc[1]
	}
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindStringSubmatch(goMod)
	if m == nil {
		tb.Fatal("go.mod: no go line")
	}
	return m[1]
}

// execForm decodes an exec-form (JSON array) instruction argument.
func execForm(tb testing.TB, in instruction, args string) []string {
	tb.Helper()
	var v []string
	if err := json.Unmarshal([]byte(args), &v); err != nil {
		tb.Fatalf("Dockerfile:%d: %s %s: want the exec form [\"...\"]: the image has no shell", in.line, in.cmd, args)
	}
	return v
}

// runtimeImage is what the runtime stage holds and runs.
type runtimeImage struct {
	files       map[string]string // destination -> source path in the build stage
	user        string
	healthcheck []string
	entrypoint  []string
	cmd         []string
	expose      []string
	env         map[string]string
}

func parseRuntime(tb testing.TB, st *stage) runtimeImage {
	tb.Helper()
	r := runtimeImage{files: map[string]string{}, env: map[string]string{}}
	for _, in := range st.instrs {
		switch in.cmd {
		case "COPY":
			f := strings.Fields(in.args)
			var from string
			for len(f) > 0 && strings.HasPrefix(f[0], "--") {
				if v, ok := strings.CutPrefix(f[0], "--from="); ok {
					from = v
				}
				f = f[1:]
			}
			if from != "build" || len(f) != 2 {
				tb.Errorf("Dockerfile:%d: COPY %s: the runtime stage copies single files from the build stage only", in.line, in.args)
				continue
			}
			r.files[f[1]] = f[0]
		case "USER":
			r.user = in.args
		case "HEALTHCHECK":
			f := strings.Fields(in.args)
			for len(f) > 0 && strings.HasPrefix(f[0], "--") {
				f = f[1:]
			}
			if len(f) == 0 || f[0] != "CMD" {
				tb.Fatalf("Dockerfile:%d: HEALTHCHECK %s: want [OPTIONS] CMD [...]", in.line, in.args)
			}
			_, rest, _ := strings.Cut(in.args, "CMD ")
			r.healthcheck = execForm(tb, in, rest)
		case "ENTRYPOINT":
			r.entrypoint = execForm(tb, in, in.args)
		case "CMD":
			r.cmd = execForm(tb, in, in.args)
		case "EXPOSE":
			r.expose = append(r.expose, strings.Fields(in.args)...)
		case "ENV":
			k, v, _ := strings.Cut(in.args, "=")
			r.env[k] = v
		case "LABEL", "STOPSIGNAL", "WORKDIR":
		default:
			tb.Errorf("Dockerfile:%d: %s in the runtime stage (FROM scratch: nothing can RUN there)", in.line, in.cmd)
		}
	}
	return r
}

// runtimeProbe returns the health probe the runtime image runs (the compose healthchecks use it).
func runtimeProbe(tb testing.TB) string {
	tb.Helper()
	d := parseDockerfile(tb)
	r := parseRuntime(tb, d.stages[len(d.stages)-1])
	if len(r.healthcheck) == 0 {
		tb.Fatal("Dockerfile: the runtime stage has no HEALTHCHECK")
	}
	return r.healthcheck[0]
}

// TestDockerfileRuntime: the image `docker build .` makes holds the static binary, its health
// probe and CA roots, runs as non-root, and probes /healthz.
func TestDockerfileRuntime(t *testing.T) {
	d := parseDockerfile(t)
	last := d.stages[len(d.stages)-1]
	if last.name != "runtime" || last.base != "scratch" {
		t.Fatalf("the last stage (what `docker build .` makes) is %s FROM %s, want runtime FROM scratch", last.name, last.base)
	}
	r := parseRuntime(t, last)

	outputs := map[string]string{} // build output -> package
	for _, b := range goBuilds(t, d.stage("build")) {
		outputs[b.out] = b.pkg
	}
	want := map[string]string{
		"/usr/local/bin/seckill":             "./cmd/seckill",
		"/usr/local/bin/healthcheck":         "./deploy/healthcheck",
		"/etc/ssl/certs/ca-certificates.crt": "/etc/ssl/certs/ca-certificates.crt",
	}
	got := map[string]string{}
	for dst, src := range r.files {
		if pkg, ok := outputs[src]; ok {
			got[dst] = pkg
		} else {
			got[dst] = src
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("files of the runtime image (destination -> package or file) (-want +got):\n%s", diff)
	}

	uid, gid, _ := strings.Cut(r.user, ":")
	if n, err := strconv.Atoi(uid); err != nil || n == 0 {
		t.Errorf("USER %q: want a numeric non-root uid (FROM scratch has no /etc/passwd to look a name up in)", r.user)
	} else if gid != "" {
		if g, err := strconv.Atoi(gid); err != nil || g == 0 {
			t.Errorf("USER %q: want a non-root numeric gid", r.user)
		}
	}
	if diff := cmp.Diff([]string{"/usr/local/bin/healthcheck", "/healthz"}, r.healthcheck); diff != "" {
		t.Errorf("HEALTHCHECK (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"/usr/local/bin/seckill"}, r.entrypoint); diff != "" {
		t.Errorf("ENTRYPOINT (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"serve"}, r.cmd); diff != "" {
		t.Errorf("CMD (-want +got):\n%s", diff)
	}
	if addr := r.env["SECKILL_HTTP_ADDR"]; !slices.Equal(r.expose, []string{strings.TrimPrefix(addr, ":")}) {
		t.Errorf("EXPOSE %v does not match SECKILL_HTTP_ADDR=%s", r.expose, addr)
	}

	lt := d.stage("loadtest")
	if lt == nil || lt.base != "scratch" {
		t.Fatal("Dockerfile: no loadtest stage FROM scratch (docker-compose.yml's loadtest service builds it)")
	}
	c := loadCompose(t)
	for _, name := range sortedKeys(c.services) {
		if tgt := c.services[name].buildTarget; tgt != "" && d.stage(tgt) == nil {
			t.Errorf("compose service %s builds target %q, which the Dockerfile lacks", name, tgt)
		}
	}
}

// TestDockerignore: the build context keeps every file the three `go build`s read (Go sources,
// and the storefront and migrations they embed), and leaves out the rest.
func TestDockerignore(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go not in PATH")
	}
	var patterns []string
	sc := bufio.NewScanner(bytes.NewReader(readRepoFile(t, ".dockerignore")))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.Contains(line, "**") || strings.HasPrefix(line, "!") {
			t.Fatalf(".dockerignore: %q: this test matches plain patterns only (no ** or !)", line)
		}
		patterns = append(patterns, strings.TrimPrefix(path.Clean(line), "/"))
	}
	ignored := func(file string) string {
		for p := file; p != "." && p != "/"; p = path.Dir(p) {
			for _, pat := range patterns {
				if ok, _ := path.Match(pat, p); ok {
					return pat
				}
			}
		}
		return ""
	}

	root := repoRoot(t)
	cmd := exec.Command(goTool, "list", "-deps", "-f",
		`{{if and .Module .Module.Main}}{{.Dir}}{{range .GoFiles}} {{.}}{{end}}{{range .EmbedFiles}} {{.}}{{end}}{{end}}`,
		"./cmd/seckill", "./deploy/healthcheck", "./loadtest")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	needed := []string{"go.mod", "go.sum"}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		dir, ok := strings.CutPrefix(f[0], root+"/")
		if !ok {
			dir = "."
		}
		for _, file := range f[1:] {
			needed = append(needed, path.Join(dir, file))
		}
	}
	if !slices.ContainsFunc(needed, func(f string) bool { return strings.HasPrefix(f, "web/") }) ||
		!slices.ContainsFunc(needed, func(f string) bool { return strings.HasPrefix(f, "migrations/") }) {
		t.Fatalf("go list found no embedded web/ or migrations/ files: %v", needed)
	}
	for _, f := range needed {
		if pat := ignored(f); pat != "" {
			t.Errorf(".dockerignore %q leaves %s out of the build context; the build needs it", pat, f)
		}
	}
	for _, f := range []string{".git/HEAD", ".run/pids/x.pid", "bin/seckill", "loadtest/results/x.html", ".env", "deploy/compose.env"} {
		if ignored(f) == "" {
			t.Errorf(".dockerignore does not keep %s out of the build context", f)
		}
	}
}

func TestShellFields(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{in: `-trimpath -ldflags='-s -w'`, want: []string{"-trimpath", "-ldflags=-s -w"}},
		{in: `-ldflags="-s -w" a\ b`, want: []string{"-ldflags=-s -w", "a b"}},
		{in: `CGO_ENABLED=0 go build && echo "x \"y\""`, want: []string{"CGO_ENABLED=0", "go", "build", "&&", "echo", `x "y"`}},
		{in: "  ", want: nil},
	} {
		got, err := shellFields(tc.in)
		if err != nil {
			t.Errorf("shellFields(%q): %v", tc.in, err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("shellFields(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
	if _, err := shellFields(`'open`); err == nil {
		t.Error("shellFields accepted an unterminated quote")
	}
}
