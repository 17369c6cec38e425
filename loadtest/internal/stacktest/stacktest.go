// Package stacktest starts what the load test's own tests run against: replicas of the app on a
// fresh database, in the test's process (internal/apptest). For tests only.
package stacktest

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/seckill-go/seckill-go/internal/apptest"
	"github.com/seckill-go/seckill-go/loadtest/internal/attack"
)

// ThreeReplicas starts three replicas of the app, the unsafe strategies served, on a fresh
// database, and returns args with the flags of a run against them (yardsticks of 500 ms, reports
// in a temporary directory) and the database.
func ThreeReplicas(t *testing.T, args ...string) ([]string, *sql.DB) {
	t.Helper()
	stack := apptest.NewStack(t)
	env := map[string]string{"SECKILL_ALLOW_UNSAFE_STRATEGIES": "true"}
	var targets []string
	for range 3 {
		targets = append(targets, stack.Start(t, env).URL)
	}
	db, err := attack.OpenDB(stack.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return append(args,
		"-targets", strings.Join(targets, ","),
		"-baseline", "500ms", "-drain-timeout", "90s",
		"-admin-token", apptest.AdminToken,
		"-mysql-dsn", stack.DSN,
		"-out", t.TempDir(),
	), db
}
