package deploy

import (
	"maps"
	"net"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/seckill-go/seckill-go/internal/tracing"
)

// The tracing form of the compose stack (issue #33): docker-compose.yml's profile tracing (Jaeger,
// built from the Dockerfile's jaeger target) and docker-compose.tracing.yml, which turns the app
// processes' tracing on and points them at it.
const (
	tracingOverride = "docker-compose.tracing.yml"
	tracingProfile  = "tracing"
	jaegerService   = "jaeger"
	jaegerOTLPPort  = "4318" // the all-in-one's OTLP/HTTP receiver
)

// TestComposeJaeger: Jaeger runs in profile tracing only, from the image the Dockerfile's jaeger
// target builds (FROM scratch: the app's probe, with -addr, on Jaeger's health endpoint), listening
// on every interface of its container, and publishes its UI on 127.0.0.1 only.
func TestComposeJaeger(t *testing.T) {
	c := loadCompose(t)
	j := c.services[jaegerService]
	if j == nil {
		t.Fatalf("%s: no %s service", composeFile, jaegerService)
	}
	if !slices.Equal(j.profiles, []string{tracingProfile}) {
		t.Errorf("%s: profiles %v, want [%s]", jaegerService, j.profiles, tracingProfile)
	}
	if j.buildTarget != jaegerService {
		t.Errorf("%s: builds target %q, want %q", jaegerService, j.buildTarget, jaegerService)
	}
	d := parseDockerfile(t)
	st := d.stage(jaegerService)
	if st == nil || st.base != "scratch" {
		t.Fatalf("Dockerfile: no %s stage FROM scratch", jaegerService)
	}
	image := map[string][]string{} // instruction -> its arguments, in order
	for _, in := range st.instrs {
		image[in.cmd] = append(image[in.cmd], in.args)
	}
	if !slices.Contains(image["ENV"], "JAEGER_LISTEN_HOST=0.0.0.0") {
		t.Errorf("Dockerfile's %s stage: ENV %q, want JAEGER_LISTEN_HOST=0.0.0.0 (the binary's default is localhost: nothing outside the container would reach it)", jaegerService, image["ENV"])
	}
	for _, copied := range []string{"/usr/local/bin/jaeger", "/usr/local/bin/healthcheck"} {
		if !slices.ContainsFunc(image["COPY"], func(a string) bool { return strings.HasSuffix(a, " "+copied) }) {
			t.Errorf("Dockerfile's %s stage copies no %s (COPY %q)", jaegerService, copied, image["COPY"])
		}
	}
	if !slices.ContainsFunc(image["EXPOSE"], func(a string) bool { return slices.Contains(strings.Fields(a), jaegerOTLPPort) }) {
		t.Errorf("Dockerfile's %s stage does not expose %s", jaegerService, jaegerOTLPPort)
	}
	if b := goBuilds(t, d.stage("build-jaeger")); len(b) != 1 || b[0].pkg != "github.com/jaegertracing/jaeger/cmd/jaeger" {
		t.Errorf("Dockerfile: the build-jaeger stage must build github.com/jaegertracing/jaeger/cmd/jaeger, builds %+v", b)
	}
	if want := []string{"CMD", "/usr/local/bin/healthcheck", "-addr", "127.0.0.1:13133", "/status"}; !slices.Equal(j.healthTest(), want) {
		t.Errorf("%s: healthcheck %q, want %q", jaegerService, j.healthTest(), want)
	}
	if !j.readOnly || !slices.Equal(j.capDrop, []string{"ALL"}) {
		t.Errorf("%s: read_only %v, cap_drop %v: traces are in memory, it needs no capability", jaegerService, j.readOnly, j.capDrop)
	}
	// Nothing of the default form waits for Jaeger.
	for _, name := range sortedKeys(c.services) {
		if _, ok := c.services[name].dependsOn[jaegerService]; ok {
			t.Errorf("%s (default form) depends on %s (profile %s)", name, jaegerService, tracingProfile)
		}
	}
}

// TestComposeTracingForm: docker-compose.tracing.yml turns tracing on in the long-running
// processes of the app image (the replicas and the worker), all alike, pointed at the jaeger
// service's OTLP/HTTP receiver, and makes them wait for it; it changes nothing else. Without it
// the app's tracing stays off (TestComposeAppSettings).
func TestComposeTracingForm(t *testing.T) {
	base := loadCompose(t)
	c := loadComposeFiles(t, composeFile, tracingOverride)

	var doc map[string]any
	readYAML(t, tracingOverride, &doc)
	svcs, _ := doc["services"].(map[string]any)
	var wantOver []string
	for name, s := range appServices(base) {
		if cmd := s.seckillCommand(); cmd == "serve" || cmd == "worker" {
			wantOver = append(wantOver, name)
		}
	}
	slices.Sort(wantOver)
	if diff := cmp.Diff(wantOver, slices.Sorted(maps.Keys(svcs))); diff != "" {
		t.Errorf("%s: services (-want +got):\n%s", tracingOverride, diff)
	}
	wantEnv := []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "SECKILL_TRACING", "SECKILL_TRACING_SAMPLE"}
	for name, raw := range svcs {
		o, _ := raw.(map[string]any)
		for k, v := range o {
			switch k {
			case "environment":
				env, _ := v.(map[string]any)
				if got := slices.Sorted(maps.Keys(env)); !slices.Equal(got, wantEnv) {
					t.Errorf("%s: %s sets %v, want %v only", tracingOverride, name, got, wantEnv)
				}
			case "depends_on":
				deps, _ := v.(map[string]any)
				if got := slices.Sorted(maps.Keys(deps)); !slices.Equal(got, []string{jaegerService}) {
					t.Errorf("%s: %s depends on %v, want %s only", tracingOverride, name, got, jaegerService)
				}
			default:
				t.Errorf("%s: %s changes %s: only environment and depends_on", tracingOverride, name, k)
			}
		}
	}

	for _, name := range wantOver {
		s := c.services[name]
		t.Run(name, func(t *testing.T) {
			cfg := loadAppConfig(t, s)
			if cfg.Tracing.Exporter != tracing.OTLP || cfg.Tracing.Sample != 0.01 {
				t.Errorf("tracing %q at %v, want %s at the app's default 0.01 (SECKILL_TRACING_SAMPLE unset)", cfg.Tracing.Exporter, cfg.Tracing.Sample, tracing.OTLP)
			}
			u, err := url.Parse(cfg.Tracing.Endpoint)
			if err != nil {
				t.Fatal(err)
			}
			host, port, err := net.SplitHostPort(u.Host)
			if err != nil || u.Scheme != "http" || host != jaegerService || port != jaegerOTLPPort || strings.Trim(u.Path, "/") != "" {
				t.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT %q, want http://%s:%s (the base URL: the exporter adds /v1/traces)", cfg.Tracing.Endpoint, jaegerService, jaegerOTLPPort)
			}
			if s.dependsOn[jaegerService] != "service_healthy" {
				t.Errorf("depends on %s %q, want service_healthy", jaegerService, s.dependsOn[jaegerService])
			}
			// The rest of the settings are the default form's.
			for k, v := range base.services[name].env {
				if s.env[k] != v {
					t.Errorf("%s changed from %q to %q", k, v, s.env[k])
				}
			}
		})
	}
	header := string(readRepoFile(t, tracingOverride))
	for _, want := range []string{"--profile " + tracingProfile, "-f " + tracingOverride, "SECKILL_TRACING_SAMPLE=1"} {
		if !strings.Contains(header, want) {
			t.Errorf("%s: its header does not say %q", tracingOverride, want)
		}
	}
	if script := string(readRepoFile(t, "scripts/compose-check.sh")); !strings.Contains(script, "TRACING_OVERRIDE="+tracingOverride) {
		t.Errorf("scripts/compose-check.sh does not validate %s", tracingOverride)
	}
}
