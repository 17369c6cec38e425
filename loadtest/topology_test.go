package main

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
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"status":"ready","topology":{"redis":"cluster (seeds a:1)","zookeeper":"z:1,z:2,z:3"}}`))
	}))
	defer srv.Close()
	admin := &adminClient{appapi.New(srv.URL, "token")}
	got := topologyOf(t.Context(), admin)
	if diff := cmp.Diff(map[string]string{"redis": "cluster (seeds a:1)", "zookeeper": "z:1,z:2,z:3"}, got); diff != "" {
		t.Fatalf("topology (-want +got):\n%s", diff)
	}
	if line := topologyLine(got); line != "Redis cluster (seeds a:1) · ZooKeeper z:1,z:2,z:3" {
		t.Errorf("line = %q", line)
	}
	status = http.StatusServiceUnavailable
	if got := topologyOf(t.Context(), admin); got != nil || topologyLine(got) != "topology: unknown" {
		t.Errorf("not ready: %v, %q", got, topologyLine(got))
	}
}

// TestReportPathsSorted: the report line lists the files sorted, .html first: compose-smoke reads
// the run's id off it.
func TestReportPathsSorted(t *testing.T) {
	dir := t.TempDir()
	files, err := writeReport(dir, &Report{RunID: "20261127-000000"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{dir + "/20261127-000000.html", dir + "/20261127-000000.json", dir + "/20261127-000000.md"}
	if diff := cmp.Diff(want, files); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
}
