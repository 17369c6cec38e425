package attack

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/seckill-go/seckill-go/loadtest/internal/appapi"
)

// TestTopologyOf: the report's topology is what the replica's /readyz says; a replica that is not
// ready, or says nothing, gives none, and the report line says "unknown".
func TestTopologyOf(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8") // the generated client decodes JSON alone
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"status":"ready","topology":{"redis":"cluster (seeds a:1)","zookeeper":"z:1,z:2,z:3"}}`))
	}))
	defer srv.Close()
	admin := &AdminClient{Client: appapi.New(srv.URL, "token")}
	got := TopologyOf(t.Context(), admin)
	if diff := cmp.Diff(map[string]string{"redis": "cluster (seeds a:1)", "zookeeper": "z:1,z:2,z:3"}, got); diff != "" {
		t.Fatalf("topology (-want +got):\n%s", diff)
	}
	if line := TopologyLine(got); line != "Redis cluster (seeds a:1) · ZooKeeper z:1,z:2,z:3" {
		t.Errorf("line = %q", line)
	}
	status = http.StatusServiceUnavailable
	if got := TopologyOf(t.Context(), admin); got != nil || TopologyLine(got) != "topology: unknown" {
		t.Errorf("not ready: %v, %q", got, TopologyLine(got))
	}
}
