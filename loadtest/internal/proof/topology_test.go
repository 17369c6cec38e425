package proof

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/seckill-go/seckill-go/loadtest/internal/attack"
)

// TestReportPathsSorted: the report line lists the files sorted, .html first: compose-smoke reads
// the run's id off it.
func TestReportPathsSorted(t *testing.T) {
	dir := t.TempDir()
	files, err := WriteReport(dir, &attack.Report{RunID: "20261127-000000"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{dir + "/20261127-000000.html", dir + "/20261127-000000.json", dir + "/20261127-000000.md"}
	if diff := cmp.Diff(want, files); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
}
