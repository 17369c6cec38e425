package yardstick

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/go-sql-driver/mysql"
)

// RowOptions configure RowRate.
type RowOptions struct {
	// DSN reaches the MySQL server (go-sql-driver format); its database name is replaced by
	// Database.
	DSN string
	// Database is the scratch database of the yardstick, created if missing [seckill_yardstick].
	// Where the DSN's user may not create it (MySQL error 1044, as for the app's user of the
	// docker-compose stack), RowRate falls back to the DSN's own database, still on a table of
	// its own, and says so in RowResult.Where.
	Database string
	// Goroutines drive the loop [16]: enough to saturate one hot row on two cores.
	Goroutines int
	// Warmup runs before the measured Duration [500ms]; Duration defaults to 3s.
	Warmup, Duration time.Duration
}

// RowResult is R.
type RowResult struct {
	RowsPerSec float64 `json:"rows_per_sec"`
	Statement  string  `json:"statement"`
	Goroutines int     `json:"goroutines"`
	// Where is the table the loop ran on, database.table, and why if it is not the scratch
	// database.
	Where string `json:"where"`
}

var validName = regexp.MustCompile(`^[A-Za-z0-9_]{1,64}$`)

// DefaultDatabase is the scratch database of RowRate.
const DefaultDatabase = "seckill_yardstick"

// rowTable is the yardstick's own table. Each run inserts a row of its own and deletes it at the
// end, so two runs at once never share a row (they still share the disk, which is the point of
// measuring in the same run as what R is compared with).
const rowTable = "hot_row"

// rowStatement is the loop's statement: the textbook deduction, without the app around it.
const rowStatement = "UPDATE " + rowTable + " SET stock = stock - 1 WHERE id = ? AND stock >= 1"

// RowRate measures R: rowStatement on one row, from o.Goroutines goroutines through database/sql
// in autocommit (one statement, one commit), with the parameters interpolated client-side as the
// app does, so one statement is one round trip. The rate is that of Rate: the median of the
// quarter-second rates after the warm-up.
func RowRate(ctx context.Context, o RowOptions) (RowResult, error) {
	if o.Database == "" {
		o.Database = DefaultDatabase
	}
	if !validName.MatchString(o.Database) {
		return RowResult{}, fmt.Errorf("yardstick R: database name %q: want letters, digits and _", o.Database)
	}
	if o.Goroutines <= 0 {
		o.Goroutines = 16
	}
	if o.Warmup == 0 {
		o.Warmup = 500 * time.Millisecond
	}
	if o.Duration <= 0 {
		o.Duration = 3 * time.Second
	}
	res := RowResult{Statement: rowStatement, Goroutines: o.Goroutines}
	db, where, err := openScratch(ctx, o.DSN, o.Database)
	if err != nil {
		return res, err
	}
	defer db.Close()
	res.Where = where
	db.SetMaxOpenConns(o.Goroutines)
	db.SetMaxIdleConns(o.Goroutines)

	if _, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+rowTable+
		" (id BIGINT AUTO_INCREMENT PRIMARY KEY, stock BIGINT NOT NULL, created_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP) ENGINE=InnoDB"); err != nil {
		return res, fmt.Errorf("yardstick R: create table: %w", err)
	}
	// Rows of runs that were killed before they could delete theirs.
	if _, err := db.ExecContext(ctx, "DELETE FROM "+rowTable+" WHERE created_at < NOW() - INTERVAL 1 DAY"); err != nil {
		return res, fmt.Errorf("yardstick R: prune: %w", err)
	}
	ins, err := db.ExecContext(ctx, "INSERT INTO "+rowTable+" (stock) VALUES (?)", int64(1)<<50)
	if err != nil {
		return res, fmt.Errorf("yardstick R: insert the row: %w", err)
	}
	id, err := ins.LastInsertId()
	if err != nil {
		return res, fmt.Errorf("yardstick R: insert the row: %w", err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_, _ = db.ExecContext(dctx, "DELETE FROM "+rowTable+" WHERE id = ?", id)
	}()

	rate, err := Rate(ctx, o.Goroutines, o.Warmup, o.Duration, func(ctx context.Context) error {
		r, err := db.ExecContext(ctx, rowStatement, id)
		if err != nil {
			return err
		}
		if n, err := r.RowsAffected(); err != nil || n != 1 {
			return fmt.Errorf("the yardstick row was not decremented (%d rows, %v)", n, err)
		}
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("yardstick R: %w", err)
	}
	res.RowsPerSec = rate
	return res, nil
}

// openScratch creates the scratch database if missing and opens it; where the DSN's user may not
// create databases it opens the DSN's own database instead. It returns where the table lives.
func openScratch(ctx context.Context, dsn, database string) (*sql.DB, string, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, "", fmt.Errorf("yardstick R: DSN: %w", err)
	}
	own := cfg.DBName
	cfg.DBName = ""
	cfg.InterpolateParams = true
	where := database + "." + rowTable
	if err := createDatabase(ctx, cfg.FormatDSN(), database); err != nil {
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != 1044 || own == "" || own == database {
			return nil, "", fmt.Errorf("yardstick R: create database %s: %w", database, err)
		}
		where = fmt.Sprintf("%s.%s (may not create %s: %s)", own, rowTable, database, me.Message)
		database = own
	}
	cfg.DBName = database
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, "", fmt.Errorf("yardstick R: %w", err)
	}
	return db, where, nil
}

func createDatabase(ctx context.Context, serverDSN, name string) error {
	db, err := sql.Open("mysql", serverDSN)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS `"+name+"`")
	return err
}
