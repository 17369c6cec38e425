package attack

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/seckill-go/seckill-go/api/client"
	"github.com/seckill-go/seckill-go/loadtest/internal/yardstick"
)

// yardstickWarmup runs before each yardstick's measured time.
const yardstickWarmup = 500 * time.Millisecond

// MeasureYardsticks measures the two yardsticks of the ratio columns, in this run: R, a raw
// single-row conditional UPDATE loop on a scratch table of the yardstick's own (never a product
// of the app), and the bare gin ceiling, attacked by vegeta exactly as the replicas are, so that
// the sold-out rate of a strategy and the ceiling are measured by the same client.
func MeasureYardsticks(ctx context.Context, o *Options, say func(string, ...any)) (*Yardsticks, error) {
	cfg, err := mysql.ParseDSN(o.MysqlDSN)
	if err != nil {
		return nil, err
	}
	db := cfg.DBName
	say("yardstick R: %s", o.BaselineFor)
	// The DSN keeps its database: it is where RowRate falls back to.
	r, err := yardstick.RowRate(ctx, yardstick.RowOptions{DSN: o.MysqlDSN, Duration: o.BaselineFor, Warmup: yardstickWarmup})
	if err != nil {
		// Where the app's user may create no database, RowRate falls back to the app's database,
		// on its own table; any other failure is a setup error.
		return nil, fmt.Errorf("%w (R runs in database %s, or in %s where that cannot be created; -baseline 0 skips it)", err, yardstick.DefaultDatabase, db)
	}
	say("yardstick R: %.0f rows/s (%s)", r.RowsPerSec, r.Where)

	say("yardstick bare gin: %s, %d workers", o.BaselineFor, o.Workers)
	p, err := yardstick.StartBareGin(ctx, "", nil)
	if err != nil {
		return nil, err
	}
	defer p.Stop()
	rate, err := vegetaCeiling(ctx, o, p.URL)
	if err != nil {
		return nil, err
	}
	say("yardstick bare gin: %.0f req/s", rate)
	return &Yardsticks{
		R:       r,
		BareGin: BareGin{RequestsPerSec: rate, Workers: o.Workers, Client: "vegeta, as the attack"},
	}, p.Stop()
}

// vegetaCeiling attacks the bare gin ceiling at base with the attack's vegeta settings, as fast
// as o.workers allow, for the warm-up and o.baselineFor, and returns the rate of answers in the
// measured time. Every answer must be the ceiling's 409.
func vegetaCeiling(ctx context.Context, o *Options, base string) (float64, error) {
	url, err := client.PurchaseURL(base, 1)
	if err != nil {
		return 0, err
	}
	one := 1
	var n atomic.Int64
	targeter := func(t *vegeta.Target) error { // as Attack's
		i := n.Add(1)
		user, key := fmt.Sprintf("ceiling-%d", i), fmt.Sprintf("ceiling-%d-k1", i)
		body, err := json.Marshal(client.PurchaseRequest{UserID: &user, Quantity: &one})
		if err != nil {
			return err
		}
		t.Method, t.URL, t.Body = http.MethodPost, url, body
		t.Header = http.Header{}
		client.SetPurchaseHeader(t.Header, client.PurchaseParams{IdempotencyKey: &key})
		return nil
	}
	attacker := newAttacker(o)
	start := time.Now()
	from, to := start.Add(yardstickWarmup), start.Add(yardstickWarmup+o.BaselineFor)
	answered := 0
	for res := range attacker.Attack(targeter, vegeta.ConstantPacer{}, yardstickWarmup+o.BaselineFor, "ceiling") {
		if ctx.Err() != nil {
			attacker.Stop()
		}
		if res.Code != http.StatusConflict {
			attacker.Stop()
			return 0, fmt.Errorf("bare gin ceiling answered %d %s, want 409", res.Code, res.Error)
		}
		if at := res.Timestamp.Add(res.Latency); !at.Before(from) && !at.After(to) {
			answered++
		}
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return float64(answered) / o.BaselineFor.Seconds(), nil
}
