package main

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill-go/seckill-go/api/client"
	"github.com/seckill-go/seckill-go/internal/audit"
	"github.com/seckill-go/seckill-go/loadtest/internal/appapi"
	"github.com/seckill-go/seckill-go/loadtest/internal/attack"
	"github.com/seckill-go/seckill-go/loadtest/internal/procstat"
	"github.com/seckill-go/seckill-go/loadtest/internal/yardstick"
)

// The sales sweep: K sales open at once, for each K of -sales-open. First they idle, and the
// replicas' memory and CPU over the idle window, less what they used with no sale open, divided
// by K, are what an open sale costs while nobody buys (its in-memory state, its share of the
// change feed, its combiner, its lock keys: all should be near nothing). Then buyers spread over
// the K sales buy every unit of each (twice as many buyers as units), and each sale is audited
// on its own: no oversell, no undersell, every accepted purchase an order. Last, the K sales are
// ended, so that the next K starts from none.

// salesOptions are the sales sweep's flags.
type salesOptions struct {
	counts   []int
	strategy string
	units    int
	idle     time.Duration
	settle   time.Duration
	workers  int
	target   string
	admin    string
	token    string
	mysqlDSN string
	pidDir   string
	drain    time.Duration
}

// salesReport is the sweep: a point per K.
type salesReport struct {
	Strategy     string       `json:"strategy"`
	UnitsPerSale int          `json:"units_per_sale"`
	Workers      int          `json:"workers"`
	IdleS        float64      `json:"idle_s"`
	SettleS      float64      `json:"settle_s"`
	Replicas     int          `json:"replicas"`
	Base         idleUse      `json:"no_sale_open"`
	Points       []salesPoint `json:"points"`
}

// idleUse is what the replicas used while idle: their resident memory at the end of the window
// and their CPU time (user + system) over it, per second.
type idleUse struct {
	RSSMB     float64 `json:"rss_mb"`
	CPUMSPerS float64 `json:"cpu_ms_per_s"`
	// MachineMSPerS is the whole machine's busy CPU time per second over the window: the
	// replicas, and what they ask of MySQL, Redis and the broker.
	MachineMSPerS float64 `json:"machine_cpu_ms_per_s"`
}

// salesPoint is K sales open at once.
type salesPoint struct {
	Open     int     `json:"open"`
	CreateMS float64 `json:"create_ms_per_sale"`
	Idle     idleUse `json:"idle"`
	// PerSaleKB and PerSaleCPUUS are the idle cost of one open sale: (Idle − Base) ÷ Open.
	PerSaleKB     float64  `json:"per_sale_kb"`
	PerSaleCPUUS  float64  `json:"per_sale_cpu_us_per_s"`
	PerSaleMachUS float64  `json:"per_sale_machine_cpu_us_per_s"`
	Buyers        int      `json:"buyers"`
	Accepted      int      `json:"accepted"`
	AcceptedPerS  float64  `json:"accepted_per_s"`
	P99MS         float64  `json:"p99_ms"`
	Status5xx     int      `json:"status_5xx"`
	Other         int      `json:"other_answers"`
	Verdict       string   `json:"verdict"`
	Violations    []string `json:"violations,omitempty"`
	AuditSeconds  float64  `json:"audit_s"`
	DrainedWithin float64  `json:"drained_within_s"`
}

func runSales(ctx context.Context, o salesOptions, say func(string, ...any)) (*salesReport, error) {
	pids, db, admin, err := openStack(ctx, "sales", o.target, o.pidDir, o.mysqlDSN, o.admin, o.token)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rep := &salesReport{Strategy: o.strategy, UnitsPerSale: o.units, Workers: o.workers, IdleS: o.idle.Seconds(), SettleS: o.settle.Seconds(), Replicas: len(pids)}
	say("sales: the replicas idle with no sale of the sweep open, %s", o.idle)
	if rep.Base, err = measureIdle(ctx, pids, o.idle); err != nil {
		return nil, err
	}
	run := time.Now().UTC().Format("150405")
	for _, k := range o.counts {
		p := salesPoint{Open: k}
		say("sales: opening %d %s sales of %d units", k, o.strategy, o.units)
		started := time.Now()
		ids, err := openSales(ctx, admin, fmt.Sprintf("scale-%s-%d", run, k), k, o.strategy, o.units)
		if err != nil {
			return nil, err
		}
		p.CreateMS = float64(time.Since(started).Microseconds()) / 1000 / float64(k)
		// A sale that just opened is busy for the boards (they read its stock every refresh,
		// waiting for its stampede) until their Busy period passes: not what an idle sale costs.
		if err := sleep(ctx, o.settle); err != nil {
			return nil, err
		}
		if p.Idle, err = measureIdle(ctx, pids, o.idle); err != nil {
			return nil, err
		}
		p.PerSaleKB = (p.Idle.RSSMB - rep.Base.RSSMB) * 1024 / float64(k)
		p.PerSaleCPUUS = (p.Idle.CPUMSPerS - rep.Base.CPUMSPerS) * 1000 / float64(k)
		p.PerSaleMachUS = (p.Idle.MachineMSPerS - rep.Base.MachineMSPerS) * 1000 / float64(k)
		say("sales: %d open, idle: %.0f MB, %.1f ms CPU/s; buying", k, p.Idle.RSSMB, p.Idle.CPUMSPerS)
		res, err := buyAcross(ctx, o, ids, fmt.Sprintf("sc%s%d", run, k))
		if err != nil {
			return nil, err
		}
		p.Buyers, p.Accepted, p.AcceptedPerS, p.P99MS, p.Status5xx, p.Other = res.buyers, res.accepted(), res.acceptedPerS(), res.p99(), res.status5xx, res.other
		auditStart := time.Now()
		p.Violations, p.DrainedWithin, err = auditSales(ctx, db, ids, res.perSale, o.units, o.drain)
		if err != nil {
			return nil, err
		}
		p.AuditSeconds = time.Since(auditStart).Seconds()
		if p.Status5xx > 0 {
			p.Violations = append(p.Violations, fmt.Sprintf("%d answers were 5xx", p.Status5xx))
		}
		p.Verdict = "PASS"
		if len(p.Violations) > 0 {
			p.Verdict = "FAIL"
		}
		say("sales: %d open: %s, %d accepted at %.0f/s, p99 %.0f ms %s", k, p.Verdict, p.Accepted, p.AcceptedPerS, p.P99MS, strings.Join(p.Violations, "; "))
		rep.Points = append(rep.Points, p)
		if err := endSales(ctx, admin, ids, o.strategy, o.units); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// openStack checks that the stack of make up answers at target, and returns its replicas' pids,
// its database, and an admin client of the replica at admin; the caller closes db.
func openStack(ctx context.Context, sweep, target, pidDir, mysqlDSN, admin, token string) ([]int, *sql.DB, *attack.AdminClient, error) {
	if err := reachable(ctx, target+"/api/v1/products"); err != nil {
		return nil, nil, nil, fmt.Errorf("the %s sweep needs the stack of make up (or -sweeps data): %w", sweep, err)
	}
	pids, err := replicaPIDs(pidDir)
	if err != nil {
		return nil, nil, nil, err
	}
	db, err := attack.OpenDB(mysqlDSN)
	if err != nil {
		return nil, nil, nil, err
	}
	return pids, db, &attack.AdminClient{Client: appapi.New(admin, token)}, nil
}

// replicaPIDs reads the pid files make up's scripts keep for its replicas (replica-N.pid).
func replicaPIDs(dir string) ([]int, error) {
	files, err := filepath.Glob(filepath.Join(dir, "replica-*.pid"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no replica pid files in %s (is the stack of make up running?)", dir)
	}
	var pids []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			return nil, fmt.Errorf("%s: %q is no pid", f, b)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

// measureIdle waits idle and returns the replicas' CPU over it and their memory at its end.
func measureIdle(ctx context.Context, pids []int, idle time.Duration) (idleUse, error) {
	// A moment for the last work of what came before (the orders of the last purchases, the
	// sales just opened reaching every replica) to end.
	if err := sleep(ctx, 2*time.Second); err != nil {
		return idleUse{}, err
	}
	before, err := procstat.CPU(pids)
	if err != nil {
		return idleUse{}, err
	}
	machine, err := yardstick.ReadCPUTimes()
	if err != nil {
		return idleUse{}, err
	}
	start := time.Now()
	if err := sleep(ctx, idle); err != nil {
		return idleUse{}, err
	}
	after, err := procstat.CPU(pids)
	if err != nil {
		return idleUse{}, err
	}
	machineAfter, err := yardstick.ReadCPUTimes()
	if err != nil {
		return idleUse{}, err
	}
	rss, err := procstat.RSS(pids)
	if err != nil {
		return idleUse{}, err
	}
	share, err := machineAfter.ShareSince(machine)
	if err != nil {
		return idleUse{}, err
	}
	return idleUse{RSSMB: float64(rss) / (1 << 20), CPUMSPerS: float64((after - before).Milliseconds()) / time.Since(start).Seconds(),
		MachineMSPerS: share.Busy * float64(runtime.NumCPU()) * 1000}, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// openSales creates k sales called prefix-i, on now for an hour, 8 at a time.
func openSales(ctx context.Context, admin *attack.AdminClient, prefix string, k int, strategy string, units int) ([]int64, error) {
	now := time.Now().UTC().Truncate(time.Second)
	starts, ends := now.Add(-time.Second), now.Add(time.Hour)
	ids := make([]int64, k)
	errs := make([]error, k)
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i := range k {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			ids[i], errs[i] = admin.CreateSale(ctx, fmt.Sprintf("%s-%d", prefix, i), client.Reset{Stock: units, Strategy: &strategy, SaleStartsAt: &starts, SaleEndsAt: &ends})
		}()
	}
	wg.Wait()
	return ids, errors.Join(errs...)
}

// endSales ends the sales: each is reset to a sale that ended a minute ago.
func endSales(ctx context.Context, admin *attack.AdminClient, ids []int64, strategy string, units int) error {
	now := time.Now().UTC().Truncate(time.Second)
	starts, ends := now.Add(-2*time.Minute), now.Add(-time.Minute)
	for _, id := range ids {
		rsp, err := admin.API().AdminResetProductWithResponse(ctx, id, client.Reset{Stock: units, Strategy: &strategy, SaleStartsAt: &starts, SaleEndsAt: &ends})
		if err != nil {
			return err
		}
		if err := appapi.Want(rsp.HTTPResponse, rsp.Body, http.StatusOK); err != nil {
			return fmt.Errorf("end sale %d: %w", id, err)
		}
	}
	return nil
}

// buyResult is what the buyers of a sales point got.
type buyResult struct {
	buyers    int
	perSale   []int // 202s per sale, by index in ids
	latencies []time.Duration
	first     time.Time
	last202   time.Time
	status5xx int
	other     int
}

func (r *buyResult) accepted() int {
	n := 0
	for _, a := range r.perSale {
		n += a
	}
	return n
}

func (r *buyResult) acceptedPerS() float64 {
	if s := r.last202.Sub(r.first).Seconds(); s > 0 {
		return float64(r.accepted()) / s
	}
	return 0
}

func (r *buyResult) p99() float64 { return yardstick.Percentiles(r.latencies).P99 }

// buyAcross sends 2 × units buyers at every sale, buyer i at sale i mod K (so that every sale is
// bought at once), o.workers in flight through o.target, one purchase each.
func buyAcross(ctx context.Context, o salesOptions, ids []int64, runID string) (*buyResult, error) {
	urls := make([]string, len(ids))
	for i, id := range ids {
		u, err := client.PurchaseURL(o.target, id)
		if err != nil {
			return nil, err
		}
		urls[i] = u
	}
	res := &buyResult{buyers: 2 * o.units * len(ids), perSale: make([]int, len(ids)), first: time.Now()}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: o.workers, MaxConnsPerHost: o.workers}}
	defer hc.CloseIdleConnections()
	var next atomic.Int64
	var mu sync.Mutex
	one := 1
	var wg sync.WaitGroup
	var firstErr error
	for range o.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= res.buyers || ctx.Err() != nil {
					return
				}
				sale := i % len(ids)
				user := fmt.Sprintf("%s-%d", runID, i)
				sent := time.Now()
				req, err := client.NewLeanPurchase(ctx, urls[sale], client.PurchaseParams{}, client.PurchaseRequest{UserID: &user, Quantity: &one})
				if err != nil {
					mu.Lock()
					firstErr = cmp.Or(firstErr, err)
					mu.Unlock()
					return
				}
				rsp, err := hc.Do(req)
				status := 0
				if err == nil {
					status = rsp.StatusCode
					_, _ = client.ReadPurchaseAnswer(rsp)
				}
				took := time.Since(sent)
				mu.Lock()
				res.latencies = append(res.latencies, took)
				switch {
				case status == http.StatusAccepted:
					res.perSale[sale]++
					res.last202 = time.Now()
				case status >= 500 || status == 0:
					res.status5xx++
				case status != http.StatusConflict && status != http.StatusGone:
					res.other++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return res, firstErr
}

// auditSales waits for each sale's orders and audits it: every unit sold, none twice, every
// accepted purchase an order. It returns the violations, and how long after the purchases the
// last sale was drained.
func auditSales(ctx context.Context, db *sql.DB, ids []int64, accepted []int, units int, drain time.Duration) ([]string, float64, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, drain)
	defer cancel()
	var out []string
	for i, id := range ids {
		f, err := audit.WaitDrained(ctx, db, id, accepted[i], 200*time.Millisecond)
		drained := err == nil
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return nil, 0, err
		}
		v := f.Violations(drained)
		if f.Sold() != units {
			v = append(v, fmt.Sprintf("%d of %d units sold", f.Sold(), units))
		}
		if accepted[i] != units {
			v = append(v, fmt.Sprintf("%d purchases accepted for %d units", accepted[i], units))
		}
		for _, s := range v {
			out = append(out, fmt.Sprintf("sale %d: %s", id, s))
		}
		if len(out) > 20 {
			out = append(out[:20], "…")
			break
		}
	}
	return slices.Clip(out), time.Since(start).Seconds(), nil
}

// passed reports whether every point PASSed.
func (r *salesReport) passed() bool {
	return !slices.ContainsFunc(r.Points, func(p salesPoint) bool { return p.Verdict != "PASS" })
}

func (r *salesReport) markdown(b *strings.Builder) {
	fmt.Fprintf(b, "## How the cost grows with the sales open at once\n\n%s sales of %d units each, open at once; %.0f s after they opened (a board reads the stock of a sale that just opened every refresh for 5 s, awaiting its stampede) the %d replicas idle for %.0f s (memory at the end, CPU over it: theirs, and the whole machine's, MySQL's and Redis's included), then 2 buyers per unit, spread over the sales, buy through the public entry (%d in flight), and every sale is audited. With none of the sweep's sales open the replicas held %.0f MB and used %.1f ms of CPU per second, the machine %.1f. Per sale: what K open sales add to that, ÷ K (below ~100 sales, within the weather).\n\n",
		r.Strategy, r.UnitsPerSale, r.SettleS, r.Replicas, r.IdleS, r.Workers, r.Base.RSSMB, r.Base.CPUMSPerS, r.Base.MachineMSPerS)
	b.WriteString("| sales open | verdict | create (ms per sale) | idle memory (MB) · per sale (kB) | idle CPU, replicas (ms/s) · per sale (µs/s) | idle CPU, machine (ms/s) · per sale (µs/s) | buyers | accepted/s | p99 (ms) | 5xx | audit (s) |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range r.Points {
		verdict := verdictText(p.Verdict, p.Violations)
		fmt.Fprintf(b, "| %s | %s | %.1f | %.0f · %.0f | %.1f · %.0f | %.1f · %.0f | %s | %.0f | %.0f | %d | %.1f |\n", count(float64(p.Open)), verdict, p.CreateMS,
			p.Idle.RSSMB, p.PerSaleKB, p.Idle.CPUMSPerS, p.PerSaleCPUUS, p.Idle.MachineMSPerS, p.PerSaleMachUS, count(float64(p.Buyers)), p.AcceptedPerS, p.P99MS, p.Status5xx, p.AuditSeconds)
	}
	b.WriteString("\n")
}

func (r *salesReport) html(b *strings.Builder) {
	xs := make([]string, len(r.Points))
	line := func(name string, y func(salesPoint) float64) series {
		s := series{name: name}
		for _, p := range r.Points {
			s.ys = append(s.ys, y(p))
		}
		return s
	}
	for i, p := range r.Points {
		xs[i] = count(float64(p.Open)) + " open"
	}
	b.WriteString("<h2>Sales open at once</h2>\n")
	chart(b, "Idle, per open sale", xs, []series{
		line("memory (kB)", func(p salesPoint) float64 { return p.PerSaleKB }),
		line("CPU, replicas (µs per second)", func(p salesPoint) float64 { return p.PerSaleCPUUS }),
		line("CPU, machine (µs per second)", func(p salesPoint) float64 { return p.PerSaleMachUS }),
	})
	chart(b, "Buying", xs, []series{
		line("accepted/s", func(p salesPoint) float64 { return p.AcceptedPerS }),
		line("p99 (ms)", func(p salesPoint) float64 { return p.P99MS }),
	})
}
