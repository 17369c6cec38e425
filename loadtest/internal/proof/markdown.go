package proof

import (
	"fmt"
	"strings"

	"github.com/seckill-go/seckill-go/loadtest/internal/attack"
	"github.com/seckill-go/seckill-go/loadtest/internal/cli"
)

// Markdown renders the report as the tables printed to stdout and saved beside the JSON.
func Markdown(r *attack.Report) string {
	var b strings.Builder
	verdict := "PASS"
	if !r.Passed {
		verdict = "FAIL"
	}
	fmt.Fprintf(&b, "\n## seckill-go load test %s — %s\n\n", r.RunID, verdict)
	fmt.Fprintf(&b, "%s · %d replicas · %d units · %d buyers × %d attempts · %s · chaos: %s",
		r.Machine, len(r.Targets), r.Settings.Stock, r.Settings.Buyers, r.Settings.Attempts, pace(r.Settings), orNone(r.Settings.Chaos))
	if r.Settings.Pay > 0 {
		fmt.Fprintf(&b, " · pay: %g of the winners", r.Settings.Pay)
	}
	b.WriteString("\n\n" + attack.TopologyLine(r.Topology) + "\n\n")
	b.WriteString("| strategy | verdict | requests | req/s | accepted | sell-out s | accepted/s | accepted/s ÷ R | sold-out req/s | sold-out req/s ÷ bare gin | accepted p50 / p95 / p99 / max ms | all p99 ms | 5xx | oversold |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|\n")
	for _, s := range r.Strategies {
		acc := s.Latency["accepted"]
		fmt.Fprintf(&b, "| %s | **%s** | %d | %.0f | %d | %.2f | %.0f | %s | %s | %s | %.1f / %.1f / %.1f / %.1f | %.1f | %d | %d |\n",
			s.Label(), s.Verdict, s.Requests, s.RequestsPerSec, s.Accepted, s.SellOutSeconds, s.AcceptedPerSec,
			attack.Ratio(s.AcceptedPerR), attack.Rate(s.SoldOutPerSec), attack.Ratio(s.SoldOutPerGin), acc.P50, acc.P95, acc.P99, acc.Max, s.Latency["all"].P99, fivexx(s), s.Oversold)
	}
	b.WriteString("\nAnswers by outcome:\n\n| strategy | " + strings.Join(outcomeOrder, " | ") + " |\n|---|" + strings.Repeat("---:|", len(outcomeOrder)) + "\n")
	for _, s := range r.Strategies {
		cells := make([]string, len(outcomeOrder))
		for i, o := range outcomeOrder {
			cells[i] = fmt.Sprint(s.Outcomes[o])
		}
		fmt.Fprintf(&b, "| %s | %s |\n", s.Label(), strings.Join(cells, " | "))
	}
	b.WriteString("\nDatabase audit after the queue drained (plain SQL):\n\n| strategy | initial | stock | reserved | orders | unpublished | users over limit | orphan orders |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range r.Strategies {
		f := s.Facts
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d | %d |\n", s.Label(), f.InitialStock, f.Stock, f.ReservedUnits, f.OrderUnits, f.Unpublished, f.UsersOverLimit, f.OrphanOrders)
	}
	b.WriteString(paymentMarkdown(r.Strategies))
	b.WriteString(viewersMarkdown(r.Strategies))
	for _, s := range r.Strategies {
		for _, e := range s.Events {
			fmt.Fprintf(&b, "\n- %s, %.1f s: %s", s.Label(), e.T, e.What)
		}
		for _, v := range s.Violations {
			fmt.Fprintf(&b, "\n- **%s: %s**", s.Label(), v)
		}
	}
	if y := r.Yardsticks; y != nil {
		b.WriteString("\n\nYardsticks, same run (the ratio columns divide by these):\n\n| yardstick | what | rate |\n|---|---|---:|\n")
		fmt.Fprintf(&b, "| R | `%s`, %d goroutines, autocommit, on %s | %.0f rows/s |\n", y.R.Statement, y.R.Goroutines, y.R.Where, y.R.RowsPerSec)
		fmt.Fprintf(&b, "| bare gin | a gin handler that parses the purchase and answers 409, in its own process; %s, %d workers | %.0f req/s |\n", y.BareGin.Client, y.BareGin.Workers, y.BareGin.RequestsPerSec)
		b.WriteString("\nsold-out req/s: the answers that arrived after the last first-time 202 ÷ the time from that 202 to the last answer.\n")
	}
	b.WriteString("\n")
	return b.String()
}

// paymentMarkdown is the table of the payment phase (-pay), empty when no strategy had one.
func paymentMarkdown(ss []attack.StrategyReport) string {
	var b strings.Builder
	for _, s := range ss {
		p := s.Payment
		if p == nil {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("\nPayment phase: a share of the winners pay, the rest let the window run out; a second wave of new buyers takes the units that came back and pays; audit at the end (declines and late: both waves):\n\n" +
				"| strategy | verdict | window s | winners | paid | declines | late | expired | returned | wait s | 2nd-wave units | 2nd-wave buyers | 2nd-wave accepted | 2nd-wave paid | stock after | paid units | charges ≠ paid |\n" +
				"|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		}
		if p.Skipped != "" {
			fmt.Fprintf(&b, "| %s | **%s** | no payment phase (%s) |||||||||||||||\n", s.Label(), s.Verdict, p.Skipped)
			continue
		}
		f, w := s.Facts, p.Second
		fmt.Fprintf(&b, "| %s | **%s** | %.1f | %d | %d | %d | %d | %d | %d | %.1f | %d | %d | %d | %d | %d | %d | %d |\n",
			s.Label(), s.Verdict, p.WindowSeconds, p.First.Orders, p.First.Paid, p.First.Declined+w.Pay.Declined, p.First.Late+w.Pay.Late,
			p.Expired, p.Returned, p.WaitSeconds, w.Units, w.Buyers, w.Accepted, w.Pay.Paid, f.Stock, f.PaidUnits, f.ChargedUnpaid+f.PaidUncharged)
	}
	return b.String()
}

// outcomeOrder is the column order of the outcome table.
var outcomeOrder = []string{"accepted", "replayed", "sold_out", "limit_reached", "rate_limited", "unavailable", "unconfirmed", "transport_error", "other", "settled_after_attack"}

func pace(s attack.Settings) string {
	if s.Rate == 0 {
		return fmt.Sprintf("as fast as %d workers go", s.Workers)
	}
	return fmt.Sprintf("%d req/s, %d workers", s.Rate, s.Workers)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func fivexx(s attack.StrategyReport) int {
	n := 0
	for code, c := range s.Status {
		if code >= 500 {
			n += c
		}
	}
	return n
}

// WriteReport writes results/<run>.md, .json and .html and returns their paths.
func WriteReport(dir string, r *attack.Report) ([]string, error) {
	var html strings.Builder
	if err := writeHTML(&html, r); err != nil {
		return nil, err
	}
	return attack.WriteFiles(dir, r.RunID, r, cli.Text{Ext: ".md", Body: Markdown(r)}, cli.Text{Ext: ".html", Body: html.String()})
}
