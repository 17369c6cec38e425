package main

// The read side's rows (#28): the read path (GET one product over the replicas ÷ the read
// ceiling, a bare gin handler answering a fixed product, same client, same run) and the fan-out
// (M subscribers of the event stream while purchases move the stock).

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/seckill-go/seckill-go/loadtest/internal/appapi"
	"github.com/seckill-go/seckill-go/loadtest/internal/viewers"
	"github.com/seckill-go/seckill-go/loadtest/internal/yardstick"
)

// read measures the read ceiling, then the app's read path right after it, with the same client
// and connections: GET of one product of a fresh sale, over every replica.
func (b *bench) read(ctx context.Context, targets []string, pprof, label string) error {
	o := b.o
	if _, err := b.ceiling(ctx, "bare gin GET", "bare-gin-read.log", "200", kindGinRead, yardstick.Blast{Read: true}); err != nil {
		return err
	}

	a := newAPI(targets[0], o.adminToken)
	id, err := a.createProduct(ctx, fmt.Sprintf("bench %s · read path · %s", b.rep.RunID, o.soldOutWith), o.soldOutWith, 1000)
	if err != nil {
		return err
	}
	if missing := appapi.WaitVisible(ctx, targets, id, 10*time.Second); len(missing) > 0 {
		return fmt.Errorf("read path: product %d not shown by %s after 10 s", id, strings.Join(missing, ", "))
	}
	row := Row{Kind: kindRead, What: "read path: GET one product", ProductID: id,
		Config: fmt.Sprintf("%s · %s · %d connections · %s", o.soldOutWith, replicas(len(targets)), o.connections, label)}
	b.say("read path: product %d, %d connections over %d replicas, %s + %s", id, o.connections, len(targets), o.warmup, o.duration)
	profile := b.profile(ctx, pprof, "read", o.duration)
	cpu := cpuWindow(o.warmup)
	res, err := yardstick.Blast{
		Targets: targets, ProductID: id, Workers: o.connections, Warmup: o.warmup, Duration: o.duration,
		RunID: b.blastID(), Read: true,
	}.Run(ctx)
	if err != nil {
		return err
	}
	row.CPU = cpu()
	profile(&row)
	ok := res.Latency[http.StatusOK]
	row.Figure, row.Unit, row.P50, row.P99, row.Answers = res.PerSecOf(http.StatusOK), "req/s", ok.P50, ok.P99, res.Answers
	if n := fiveXX(res.Status); n > 0 {
		b.problem("read path: %d answers 5xx", n)
	}
	if other := res.Sent - res.Status[http.StatusOK]; other > 0 {
		row.Notes = append(row.Notes, fmt.Sprintf("%d answers were not 200: %s %q", other, answersCell(res.Answers), res.Failures))
	}
	b.add(row)
	b.say("read path: %.0f req/s", row.Figure)
	return nil
}

// fanout measures the event stream's fan-out: o.subscribers viewers hold the stream of one
// product, spread over the replicas, while o.fanoutBuyers workers buy it (one unit per buyer, the
// stock never running out) for the warm-up and o.duration. The figure is the events the
// subscribers read in the measured window per second; P50 and P99 are how late they learnt of
// the units sold (viewers.Lags: from each unit's 202).
func (b *bench) fanout(ctx context.Context, targets []string, pprof, label string) error {
	o := b.o
	a := newAPI(targets[0], o.adminToken)
	id, err := a.createProduct(ctx, fmt.Sprintf("bench %s · fan-out · %s", b.rep.RunID, o.fanoutWith), o.fanoutWith, o.stock)
	if err != nil {
		return err
	}
	row := Row{Kind: kindFanout, What: "fan-out: events delivered", ProductID: id,
		Config: fmt.Sprintf("%s subscribers over %s · %s, %d purchase workers · %s", appapi.Thousands(o.subscribers), replicas(len(targets)), o.fanoutWith, o.fanoutBuyers, label)}
	if missing := appapi.WaitVisible(ctx, targets, id, 10*time.Second); len(missing) > 0 {
		return fmt.Errorf("fan-out: product %d not shown by %s after 10 s", id, strings.Join(missing, ", "))
	}
	b.say("fan-out: product %d, %d subscribers over %d replicas", id, o.subscribers, len(targets))
	crowd, err := viewers.Start(ctx, viewers.Config{Mode: viewers.Stream, Count: o.subscribers, Targets: targets, ProductID: id, OwnAddresses: true})
	if err != nil {
		return err
	}
	defer crowd.Stop()
	connected := crowd.WaitConnected(ctx, time.Minute)
	if connected < o.subscribers {
		row.Notes = append(row.Notes, fmt.Sprintf("%d of %d subscribers connected within a minute", connected, o.subscribers))
	}
	b.say("fan-out: %d subscribers connected; %d purchase workers, %s + %s", connected, o.fanoutBuyers, o.warmup, o.duration)

	var (
		mu         sync.Mutex
		sold, sent []time.Time
	)
	profile := b.profile(ctx, pprof, "fanout", o.duration)
	cpu := cpuWindow(o.warmup)
	start := time.Now()
	res, err := yardstick.Blast{
		Targets: targets, ProductID: id, Workers: o.fanoutBuyers, Warmup: o.warmup, Duration: o.duration,
		RunID: b.blastID(), IdempotencyKeys: true,
		OnAnswer: func(status int, s, at time.Time) {
			if status == http.StatusAccepted {
				mu.Lock()
				sold, sent = append(sold, at), append(sent, s)
				mu.Unlock()
			}
		},
	}.Run(ctx)
	if err != nil {
		return err
	}
	row.CPU = cpu()
	profile(&row)
	from := start.Add(o.warmup)
	to := from.Add(o.duration)
	// The last units sold reach the subscribers within a board refresh and a write: wait for
	// them (a few seconds at most) so that they are not counted as missed.
	deadline := time.Now().Add(5 * time.Second)
	for !crowd.EveryoneReadAtMost(o.stock-len(sold)) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	sum := viewers.Summarize(crowd.Stop(), from, to, connected, o.stock, sold, sent)
	row.Figure, row.Unit, row.P50, row.P99, row.Answers = sum.EventsPerSec, "events/s", sum.Lag.Latency.P50, sum.Lag.Latency.P99, res.Answers
	row.Accepted = res.Status[http.StatusAccepted]
	row.Fanout = &sum
	if n := sum.FiveXX(); n > 0 {
		b.problem("fan-out: %d stream connections answered 5xx (%s)", n, strings.Join(sum.Failures, "; "))
	}
	if n := fiveXX(res.Status); n > 0 {
		b.problem("fan-out: %d purchases answered 5xx", n)
	}
	row.Notes = append(row.Notes, fmt.Sprintf("%.2f events/s per subscriber; %.0f purchases accepted/s meanwhile; lag p99 %s ms from the 202s, %s ms from their sending; %d of %d samples never read; events %v",
		sum.PerViewerPerSec, res.PerSecOf(http.StatusAccepted), ms(sum.Lag.Latency.P99), ms(sum.LagFromSend.Latency.P99), sum.Lag.Missed, sum.Lag.Samples, sum.Events))
	if len(sum.Failures) > 0 {
		row.Notes = append(row.Notes, "first subscriber failures: "+strings.Join(sum.Failures, "; "))
	}
	b.add(row)
	b.say("fan-out: %.0f events/s to %d subscribers (%.2f each), lag p99 %.0f ms", row.Figure, connected, sum.PerViewerPerSec, sum.Lag.Latency.P99)
	return nil
}
