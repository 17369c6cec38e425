package yardstick

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/itest"
)

// TestRowRate runs R for half a second on a scratch database of the test's own.
func TestRowRate(t *testing.T) {
	itest.Integration(t)
	name := "seckill_yardstick_it_" + itest.Suffix(8)
	server := serverDB(t)
	t.Cleanup(func() { _, _ = server.Exec("DROP DATABASE IF EXISTS `" + name + "`") })

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := RowRate(ctx, RowOptions{DSN: itest.ServerDSN, Database: name, Goroutines: 4, Warmup: 100 * time.Millisecond, Duration: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.RowsPerSec <= 0 || res.Goroutines != 4 || res.Where != name+".hot_row" || !strings.HasPrefix(res.Statement, "UPDATE hot_row SET stock = stock - 1 WHERE id = ? AND stock >= 1") {
		t.Errorf("RowRate = %+v", res)
	}
	t.Logf("R = %.0f rows/s (4 goroutines, -race)", res.RowsPerSec)
	var rows int
	if err := server.QueryRow("SELECT COUNT(*) FROM `" + name + "`.hot_row").Scan(&rows); err != nil || rows != 0 {
		t.Errorf("%d rows left in the yardstick's table (%v); each run must delete its own", rows, err)
	}
}

func TestRowRateRefusesABadName(t *testing.T) {
	if _, err := RowRate(context.Background(), RowOptions{DSN: "root:@tcp(127.0.0.1:1)/", Database: "x`; DROP"}); err == nil {
		t.Error("RowRate accepted a database name that is no identifier")
	}
}

func serverDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", itest.ServerDSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
