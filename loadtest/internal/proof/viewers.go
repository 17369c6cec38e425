package proof

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/seckill-go/seckill-go/loadtest/internal/appapi"
	"github.com/seckill-go/seckill-go/loadtest/internal/attack"
	"github.com/seckill-go/seckill-go/loadtest/internal/viewers"
	"github.com/seckill-go/seckill-go/loadtest/internal/yardstick"
)

// viewerOptions are the -viewers flags.
type viewerOptions struct {
	counts     []int // crowd sizes, one attack each per strategy; nil: no crowd, no viewers table
	rounds     int   // times the counts are played, in alternating order
	mode       viewers.Mode
	targets    []string
	warmup     time.Duration
	linger     time.Duration
	connectFor time.Duration
	pollEvery  time.Duration
	listEvery  time.Duration
	ownAddrs   bool
}

// parseCounts reads -viewers: crowd sizes, comma-separated, each at least 0, none twice.
func parseCounts(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		n, err := strconv.Atoi(strings.ReplaceAll(part, "_", ""))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("-viewers: %q is not a count of viewers", part)
		}
		for _, m := range out {
			if m == n {
				return nil, fmt.Errorf("-viewers: %d twice", n)
			}
		}
		out = append(out, n)
	}
	return out, nil
}

// defaultViewerTargets is where viewers go without -viewer-targets: polls through the public
// entry (nginx, with its micro-cache: the production shape), streams to the replicas directly.
func defaultViewerTargets(mode viewers.Mode, replicas []string, getenv func(string) string) []string {
	if mode == viewers.Stream {
		return replicas
	}
	lb := getenv("SECKILL_LB_ADDR")
	if lb == "" {
		lb = "127.0.0.1:8080"
	}
	return []string{"http://" + lb}
}

// CrowdRun is one attack's crowd: its size, and its round of -viewer-rounds (0 with one round).
type CrowdRun struct{ count, round int }

// crowdRuns are the attacks of each strategy: the counts once without -viewer-rounds (one attack
// without a crowd without -viewers), else the counts forwards, backwards, forwards…, one pass a
// round, so that a drift of the machine during the run weighs on every size alike.
func crowdRuns(v viewerOptions) []CrowdRun {
	if len(v.counts) == 0 {
		return []CrowdRun{{}}
	}
	if v.rounds <= 1 {
		out := make([]CrowdRun, len(v.counts))
		for i, n := range v.counts {
			out[i] = CrowdRun{count: n}
		}
		return out
	}
	var out []CrowdRun
	for r := 1; r <= v.rounds; r++ {
		for i := range v.counts {
			if r%2 == 0 {
				i = len(v.counts) - 1 - i
			}
			out = append(out, CrowdRun{count: v.counts[i], round: r})
		}
	}
	return out
}

// label names the attack in progress lines.
func (c CrowdRun) label(strategy string, mode viewers.Mode) string {
	l := strategy
	if c.count > 0 {
		l += fmt.Sprintf(" · %d %s viewers", c.count, mode)
	}
	if c.round > 0 {
		l += fmt.Sprintf(" · round %d", c.round)
	}
	return l
}

// productName is the product an attack sells: one per strategy and crowd, reset by each run.
func productName(strategy string, c CrowdRun, mode viewers.Mode) string {
	name := "loadtest · " + strategy
	if c.count > 0 {
		name += fmt.Sprintf(" · %d %s viewers", c.count, mode)
	}
	if c.round > 1 {
		name += fmt.Sprintf(" · round %d", c.round)
	}
	return name
}

// watch is one attack's crowd: started before the attack, stopped once the sale is over.
type watch struct {
	o         *Options
	crowd     *viewers.Crowd // nil for a count of 0
	productID int64
	connected int
	before    mysqlStatus
	cpu       yardstick.CPUTimes
	procs     yardstick.ProcessTimes
	from, to  time.Time
	say       func(string, ...any)
}

// startWatch starts count viewers on productID (none for 0) and waits until they watch: every
// stream connected (at most -viewer-connect), then -viewer-warmup.
func startWatch(ctx context.Context, o *Options, productID int64, count int, say func(string, ...any)) (*watch, error) {
	w := &watch{o: o, productID: productID, say: say}
	if count == 0 {
		return w, nil
	}
	if missing := appapi.WaitVisible(ctx, o.Targets, productID, 5*time.Second); len(missing) > 0 {
		say("product %d not shown by %s after 5 s", productID, strings.Join(missing, ", "))
	}
	v := o.view
	c, err := viewers.Start(ctx, viewers.Config{
		Mode: v.mode, Count: count, Targets: v.targets, ProductID: productID,
		PollEvery: v.pollEvery, ListEvery: v.listEvery, OwnAddresses: v.ownAddrs,
	})
	if err != nil {
		return nil, err
	}
	w.crowd = c
	if v.mode == viewers.Stream {
		n := c.WaitConnected(ctx, v.connectFor)
		say("%d of %d stream viewers connected", n, count)
	}
	select {
	case <-ctx.Done():
		c.Stop()
		return nil, ctx.Err()
	case <-time.After(v.warmup):
	}
	w.connected = c.Connected()
	if v.mode == viewers.Poll {
		say("%d poll viewers, %d answered", count, w.connected)
	}
	return w, nil
}

// stop stops the crowd, if it still runs (an attack that failed).
func (w *watch) stop() {
	if w.crowd != nil {
		w.crowd.Stop()
	}
}

// attackBegins marks the start of the measured window and reads MySQL's counters and the CPU's.
func (w *watch) attackBegins(ctx context.Context, db *sql.DB) {
	w.before, _ = readMySQLStatus(ctx, db)
	w.cpu, _ = yardstick.ReadCPUTimes()
	w.procs = yardstick.ReadProcessTimes()
	w.from = time.Now()
}

// attackEnded marks its end and returns MySQL's rates over the window, and where the CPU went.
func (w *watch) attackEnded(ctx context.Context, db *sql.DB) (*attack.MySQLRates, *yardstick.CPUShare, []yardstick.ProgramCPU) {
	w.to = time.Now()
	d := w.to.Sub(w.from)
	var share *yardstick.CPUShare
	if now, err := yardstick.ReadCPUTimes(); err == nil {
		if s, err := now.ShareSince(w.cpu); err == nil {
			share = &s
		}
	}
	programs := yardstick.ReadProcessTimes().ProgramsSince(w.procs, d, os.Getpid())
	programs = programs[:min(len(programs), 6)]
	after, err := readMySQLStatus(ctx, db)
	if err != nil || w.before == nil {
		w.say("MySQL status counters: %v", err)
		return nil, share, programs
	}
	return mysqlRates(w.before, after, d), share, programs
}

// finish waits, once the attack is judged, up to -viewer-linger for every viewer to read the
// sold out of a sale that sold out, stops the crowd and returns what it saw, and the violations
// it found: a 5xx answered to a viewer, a viewer that never read the sold out.
func (w *watch) finish(ctx context.Context, sr *attack.StrategyReport, answers []attack.Answer) (*attack.ViewersReport, []string) {
	rep := &attack.ViewersReport{}
	rep.Mode = w.o.view.mode
	if w.crowd == nil {
		return rep, nil
	}
	soldOut := sr.Facts.InitialStock > 0 && sr.Facts.Stock <= 0
	if soldOut && !w.crowd.WaitSoldOut(ctx, w.o.view.linger) {
		w.say("%d of %d viewers read the sold out within %s", w.crowd.SoldOutSeen(), w.crowd.Count(), w.o.view.linger)
	}
	res := w.crowd.Stop()
	sold, sent := soldTimes(answers)
	rep.Summary = viewers.Summarize(res, w.from, w.to, w.connected, sr.Facts.InitialStock, sold, sent)
	var v []string
	if n := rep.FiveXX(); n > 0 {
		v = append(v, fmt.Sprintf("%d viewer reads answered 5xx (%s)", n, statusList(rep.Summary)))
	}
	if soldOut && rep.SoldOutSeen < rep.Viewers {
		v = append(v, fmt.Sprintf("%d of %d viewers never read the sold out (waited %s after the drain)", rep.Viewers-rep.SoldOutSeen, rep.Viewers, w.o.view.linger))
	}
	return rep, v
}

// soldTimes are, for each purchase first accepted during the attack (its order id's first 202),
// when its 202 arrived and when it was sent.
func soldTimes(answers []attack.Answer) (arrived, sent []time.Time) {
	seen := map[string]bool{}
	for _, a := range answers {
		if a.Status != http.StatusAccepted || a.Replayed || a.OrderID == "" || seen[a.OrderID] {
			continue
		}
		seen[a.OrderID] = true
		arrived = append(arrived, a.Sent.Add(a.Latency))
		sent = append(sent, a.Sent)
	}
	return arrived, sent
}

// statusList writes a summary's statuses: "200 × 1,234 · 304 × 5,678 · no answer × 3".
func statusList(s viewers.Summary) string {
	var parts []string
	for _, code := range s.Statuses() {
		name := strconv.Itoa(code)
		if code == 0 {
			name = "no answer"
		}
		parts = append(parts, name+" × "+appapi.Thousands(s.Status[code]))
	}
	return strings.Join(parts, " · ")
}

// relateToNoViewers sets each attack's accepted/s ÷ that of its strategy's attack without
// viewers (with rounds: the median of those attacks).
func relateToNoViewers(ss []attack.StrategyReport) {
	none := map[string][]float64{}
	for _, s := range ss {
		if s.Viewers != nil && s.Viewers.Viewers == 0 {
			none[s.Strategy] = append(none[s.Strategy], s.AcceptedPerSec)
		}
	}
	for i := range ss {
		if v := ss[i].Viewers; v != nil {
			v.AcceptedVsNone = attack.RatioOf(ss[i].AcceptedPerSec, median(none[ss[i].Strategy]))
		}
	}
}

// median is the middle of xs (the mean of the two middles), 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// roundsHeader is the rounds table's columns; roundsNote says how to read it.
var roundsHeader = []string{"strategy", "viewers", "mode", "rounds", "accepted/s", "÷ 0 viewers", "lag p99 ms", "5xx", "sold out read", "MySQL reads/s", "MySQL writes/s", "verdicts"}

const roundsNote = "The rounds summed up: per crowd size, the median over its rounds (÷ 0 viewers: the median of the rounds' ratios to the median attack without viewers; in brackets each round's); 5xx and sold out read over all its rounds."

// roundsRows are, for a run of several rounds (-viewer-rounds), each crowd size's attacks summed
// up, in roundsHeader's columns: medians over the rounds, and the correctness figures of all of
// them. None for a run of one round.
func roundsRows(ss []attack.StrategyReport) [][]string {
	type key struct {
		strategy string
		count    int
	}
	var keys []key // in the run's order: strategies as attacked, sizes as the first round had them
	by := map[key][]*attack.StrategyReport{}
	for i := range ss {
		s := &ss[i]
		if s.Viewers == nil || s.Viewers.Round == 0 {
			continue
		}
		k := key{s.Strategy, s.Viewers.Viewers}
		if by[k] == nil {
			keys = append(keys, k)
		}
		by[k] = append(by[k], s)
	}
	var rows [][]string
	for _, k := range keys {
		runs := by[k]
		var acc, ratios, lag, reads, writes []float64
		fiveXX, seen, viewers := 0, 0, 0
		verdicts := map[string]int{}
		for _, s := range runs {
			v := s.Viewers
			acc = append(acc, s.AcceptedPerSec)
			ratios = append(ratios, v.AcceptedVsNone)
			if v.Lag.Latency.Count > 0 {
				lag = append(lag, v.Lag.Latency.P99)
			}
			if v.MySQL != nil {
				reads, writes = append(reads, v.MySQL.ReadsPerSec), append(writes, v.MySQL.WritesPerSec)
			}
			fiveXX += v.FiveXX()
			seen, viewers = seen+v.SoldOutSeen, viewers+v.Viewers
			verdicts[s.Verdict]++
		}
		ratioCells := make([]string, len(ratios))
		for i, r := range ratios {
			ratioCells[i] = attack.Ratio(r)
		}
		var vs []string
		for _, w := range slices.Sorted(maps.Keys(verdicts)) {
			vs = append(vs, fmt.Sprintf("%s × %d", w, verdicts[w]))
		}
		lagCell, soldCell := "—", "—"
		if len(lag) > 0 {
			lagCell = attack.FormatNum(median(lag), 1)
		}
		if viewers > 0 {
			soldCell = fmt.Sprintf("%s of %s", appapi.Thousands(seen), appapi.Thousands(viewers))
		}
		rows = append(rows, []string{k.strategy, appapi.Thousands(k.count), string(runs[0].Viewers.Mode), strconv.Itoa(len(runs)),
			fmt.Sprintf("%.0f", median(acc)), fmt.Sprintf("%s (%s)", attack.Ratio(median(ratios)), strings.Join(ratioCells, ", ")),
			lagCell, strconv.Itoa(fiveXX), soldCell, attack.Rate(median(reads)), attack.Rate(median(writes)), strings.Join(vs, ", ")})
	}
	return rows
}

// viewersRoundsMarkdown is the rounds table (roundsRows), empty for a run of one round.
func viewersRoundsMarkdown(ss []attack.StrategyReport) string {
	rows := roundsRows(ss)
	if len(rows) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n" + roundsNote + "\n\n| " + strings.Join(roundsHeader, " | ") + " |\n|---|---:|---|---:|---:|---|---:|---:|---:|---:|---:|---|\n")
	for _, r := range rows {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
	return b.String()
}

// The counters read: Com_select counts prepared executions too (Com_stmt_execute beside it),
// and SHOW STATUS itself is none of them.
var (
	readCounters  = []string{"Com_select"}
	writeCounters = []string{"Com_insert", "Com_insert_select", "Com_update", "Com_update_multi", "Com_delete", "Com_delete_multi", "Com_replace", "Com_replace_select"}
	otherCounters = []string{"Com_begin", "Com_commit", "Com_rollback", "Com_stmt_execute", "Questions"}
)

type mysqlStatus map[string]int64

func readMySQLStatus(ctx context.Context, db *sql.DB) (mysqlStatus, error) {
	names := append(append(append([]string{}, readCounters...), writeCounters...), otherCounters...)
	rows, err := db.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN ('"+strings.Join(names, "','")+"')")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	st := mysqlStatus{}
	for rows.Next() {
		var name string
		var v int64
		if err := rows.Scan(&name, &v); err != nil {
			return nil, err
		}
		st[name] = v
	}
	return st, rows.Err()
}

// mysqlRates are the rates between two readings d apart.
func mysqlRates(before, after mysqlStatus, d time.Duration) *attack.MySQLRates {
	r := &attack.MySQLRates{Seconds: d.Seconds(), Deltas: map[string]int64{}}
	for name, v := range after {
		r.Deltas[name] = v - before[name]
	}
	if r.Seconds <= 0 {
		return r
	}
	sum := func(names []string) float64 {
		var n int64
		for _, name := range names {
			n += r.Deltas[name]
		}
		return float64(n) / r.Seconds
	}
	r.ReadsPerSec, r.WritesPerSec = sum(readCounters), sum(writeCounters)
	return r
}

// ---------------------------------------------------------------- the report's viewers table

// viewersMarkdown is the viewers table, empty when the run had no -viewers.
func viewersMarkdown(ss []attack.StrategyReport) string {
	var b strings.Builder
	for _, s := range ss {
		v := s.Viewers
		if v == nil {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("\nViewers during each attack, side by side (same run). ÷ 0 viewers: accepted/s ÷ the same strategy's attack without viewers. " +
				"Reads: polls answered during the attack (stream: connections, latency to the first event). Lag: from a unit's 202 arriving to a viewer reading the stock without it; " +
				"\"from send\" times it from the request's sending instead (an upper bound). MySQL: statements/s over the attack from SHOW GLOBAL STATUS, server-wide:\n\n" +
				"| strategy | viewers | mode | verdict | " + strings.Join(viewerColumns, " | ") + " |\n" +
				"|---|---:|---|---|" + strings.Repeat("---:|", len(viewerColumns)) + "\n")
		}
		cells := viewerCells(&s)
		fmt.Fprintf(&b, "| %s | %s | %s | **%s** | %s |\n", s.Strategy, cells[0], v.Mode, s.Verdict, strings.Join(cells[1:], " | "))
	}
	for _, s := range ss {
		if v := s.Viewers; v != nil && (v.CPU != nil || len(v.Programs) > 0) {
			fmt.Fprintf(&b, "\n- %s, CPU during the attack: %s", s.Label(), cpuLine(v))
		}
	}
	for _, s := range ss {
		if v := s.Viewers; v != nil && len(v.Failures) > 0 {
			fmt.Fprintf(&b, "\n- %s, first viewer failures: %s", s.Label(), strings.Join(v.Failures, "; "))
		}
	}
	b.WriteString(viewersRoundsMarkdown(ss))
	if b.Len() > 0 {
		b.WriteString("\n")
	}
	return b.String()
}

// viewerColumns are the headings of viewerCells but the first.
var viewerColumns = []string{"accepted/s", "÷ 0 viewers", "read req/s", "read p50 / p99 ms", "304 share", "429", "5xx", "no answer",
	"events/s", "lag p50 / p99 ms", "lag p99 from send ms", "sold out read", "MySQL reads/s", "MySQL writes/s"}

// viewerCells are an attack's figures in the viewers table: its crowd size, then viewerColumns.
func viewerCells(s *attack.StrategyReport) []string {
	v := s.Viewers
	return []string{appapi.Thousands(v.Viewers), fmt.Sprintf("%.0f", s.AcceptedPerSec), attack.Ratio(v.AcceptedVsNone),
		viewerCell(v, attack.Rate(v.ReadsPerSec)), viewerCell(v, latencyPair(v.ReadLatency.P50, v.ReadLatency.P99, v.ReadLatency.Count)),
		viewerCell(v, attack.Share(v.NotModifiedShare, v.Reads)), viewerCell(v, strconv.Itoa(v.TooMany())), viewerCell(v, strconv.Itoa(v.FiveXX())),
		viewerCell(v, strconv.Itoa(v.NoAnswer())), viewerCell(v, attack.Rate(v.EventsPerSec)),
		viewerCell(v, lagCell(v.Lag)), viewerCell(v, msCell(v.LagFromSend.Latency.P99, v.LagFromSend.Latency.Count)),
		viewerCell(v, soldOutCell(v)), mysqlCell(v.MySQL, true), mysqlCell(v.MySQL, false)}
}

// cpuLine is where the CPU went during an attack: "machine 97 % busy, 2 % stolen · seckill 1.21
// cores · loadtest (this process) 0.43 · mariadbd 0.18".
func cpuLine(v *attack.ViewersReport) string {
	var parts []string
	if c := v.CPU; c != nil {
		parts = append(parts, fmt.Sprintf("machine %.0f %% busy, %.0f %% stolen", 100*c.Busy, 100*c.Steal))
	}
	for i, p := range v.Programs {
		unit := ""
		if i == 0 {
			unit = " cores"
		}
		parts = append(parts, fmt.Sprintf("%s %.2f%s", p.Program, p.Cores, unit))
	}
	return strings.Join(parts, " · ")
}

// viewerCell is cell, or — for an attack without viewers.
func viewerCell(v *attack.ViewersReport, cell string) string {
	if v.Viewers == 0 {
		return "—"
	}
	return cell
}

func latencyPair(p50, p99 float64, n int) string {
	if n == 0 {
		return "—"
	}
	return fmt.Sprintf("%s / %s", attack.FormatNum(p50, 1), attack.FormatNum(p99, 1))
}

// lagCell is "p50 / p99", and the share of the samples no viewer ever read (a stock that never
// reached the units acknowledged: the unsafe control's lost updates, or a viewer cut off).
func lagCell(l viewers.Lag) string {
	cell := latencyPair(l.Latency.P50, l.Latency.P99, l.Latency.Count)
	if l.Missed > 0 && l.Samples > 0 {
		cell += fmt.Sprintf(" (%.0f %% never read)", 100*float64(l.Missed)/float64(l.Samples))
	}
	return cell
}

func msCell(v float64, n int) string {
	if n == 0 {
		return "—"
	}
	return attack.FormatNum(v, 1)
}

// soldOutCell is how many viewers read the sold out: "1,000 of 1,000".
func soldOutCell(v *attack.ViewersReport) string {
	return fmt.Sprintf("%s of %s", appapi.Thousands(v.SoldOutSeen), appapi.Thousands(v.Viewers))
}

func mysqlCell(m *attack.MySQLRates, reads bool) string {
	switch {
	case m == nil:
		return "—"
	case reads:
		return fmt.Sprintf("%.0f", m.ReadsPerSec)
	}
	return fmt.Sprintf("%.0f", m.WritesPerSec)
}
