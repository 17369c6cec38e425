package fairness

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/seckill-go/seckill-go/loadtest/internal/attack"
	"github.com/seckill-go/seckill-go/loadtest/internal/cli"
)

// Markdown renders the report: the settings, one row per sale, and each sale's details.
func Markdown(r *Report) string {
	var b strings.Builder
	s := r.Settings
	fmt.Fprintf(&b, "\n## seckill-go waiting room %s\n\n", r.RunID)
	fmt.Fprintf(&b, "%s · %s · commit %s · took %.0f s · targets %s\n\n", r.Machine, r.StartedAt.Format("2006-01-02 15:04 UTC"),
		r.Commit, r.Took, strings.Join(r.Targets, ", "))
	if s.Fault != "" {
		fmt.Fprintf(&b, "fault in every sale: **%s**, %s after its start", s.Fault, s.FaultAt)
		if s.FaultFor != "" {
			fmt.Fprintf(&b, ", down for %s", s.FaultFor)
		}
		b.WriteString("\n\n")
	}
	fmt.Fprintf(&b, "per sale: %d visitors, %d of them bots (%d connections each, polling every %s); %d units; admit_rate %.4g/s, "+
		"max_active %d, session %d s, abandon %d s; the queue opens %s before the sale; honest buyers arrive at random until %s after it "+
		"and think %s once admitted; seed %d\n\n",
		s.Crowd, s.Bots, s.BotConns, s.BotPoll, s.Stock, s.AdmitRate, s.MaxActive, s.SessionSeconds, s.AbandonSeconds, s.PreQueue, s.ArriveAfter, s.Think, s.Seed)
	b.WriteString("| strategy | room | verdict | audit | bots' units / units (share) | crowd share | fair share (bound) | order | busiest second / setting | ETA error p50 / p90 | fouls refused |\n")
	b.WriteString("|---|---|---|---|---:|---:|---:|---|---:|---:|---:|\n")
	for _, sl := range r.Sales {
		j := sl.Judgement
		f := j.Fairness
		fmt.Fprintf(&b, "| %s | %s | **%s** | %s | %d / %d (%s) | %s | %s (%s) | %s | %d / %.4g | %s / %s | %d of %d |\n",
			sl.Strategy, sl.Variant, sl.Verdict, sl.Audit, f.BotsUnits, f.Units, pct(f.UnitsShare), pct(f.CrowdShare),
			pct(ratio64(f.Lottery.Expected, f.Units)), pct(ratio64(f.Lottery.Bound, f.Units)),
			orderCell(j.Order), j.Rate.Max, j.Rate.Setting, pct(j.ETA.P50), pct(j.ETA.P90), j.Fouls.Refused, j.Fouls.Sent)
	}
	b.WriteString("\n")
	for _, sl := range r.Sales {
		saleDetails(&b, sl)
	}
	if r.Passed {
		b.WriteString("**PASS**: every audit as its strategy must show, every room check passed.\n")
	} else {
		b.WriteString("**FAIL**: see the verdicts above.\n")
	}
	return b.String()
}

// orderCell is the order test's figure: FIFO's ρ, or the shuffled pre-queue's χ² p.
func orderCell(o Order) string {
	mark := "ok"
	if !o.Passed {
		mark = "FAIL"
	}
	if o.PreChi != nil {
		return fmt.Sprintf("pre-queue χ² p %.2f, after ρ %s (%s)", o.PreChi.P, num(o.Rho), mark)
	}
	return fmt.Sprintf("ρ %s (%s)", num(o.Rho), mark)
}

func saleDetails(b *strings.Builder, sl Sale) {
	j := sl.Judgement
	f, o, r, e := j.Fairness, j.Order, j.Rate, j.ETA
	fmt.Fprintf(b, "### %s · %s (product %d, sale %s): %s\n\n", sl.Strategy, sl.Variant, sl.ProductID, sl.SaleID, sl.Verdict)
	fmt.Fprintf(b, "- **fairness** (%s): bots are %d of %d visitors (%s); %d of the %d in the pre-queue; the room admitted %d, %d of them bots; "+
		"a fair room gives the bots %.1f ± %.1f of those admissions, bound %.1f; they bought %d of the %d units (%s). "+
		"%d honest buyers were admitted and outrun (their purchase found the units gone).\n",
		passWord(f.Passed), f.Bots, f.Crowd, pct(f.CrowdShare), f.BotsInPreQueue, f.PreQueue, f.Admitted, f.BotsAdmitted,
		f.Lottery.Expected, f.Lottery.SD, f.Lottery.Bound, f.BotsUnits, f.Units, pct(f.UnitsShare), f.HonestOutrun)
	if o.PreChi != nil {
		fmt.Fprintf(b, "- **order** (%s): within the pre-queue (%d visitors) χ² %.1f on %d df (%d×%d bins), p %.3f; Spearman ρ %s, p %.3f; "+
			"bots ahead of the honest (Mann-Whitney, one-sided) z %.2f, p %.3f. After the opening: ρ %s over %d visitors, all behind the pre-queue: %v. "+
			"%d never learnt their place.\n",
			passWord(o.Passed), o.PreChi.Pairs, o.PreChi.Stat, o.PreChi.DF, o.PreChi.Bins, o.PreChi.Bins, o.PreChi.P, num(o.PreRho), o.PreRhoP,
			o.BotsAhead.Z, o.BotsAhead.P, num(o.Rho), o.RhoPairs, o.AfterBehind, o.Unknown)
	} else {
		fmt.Fprintf(b, "- **order** (%s): Spearman ρ of join time and place %s over %d visitors; %d never learnt their place.\n",
			passWord(o.Passed), num(o.Rho), o.RhoPairs, o.Unknown)
	}
	if o.Why != "" {
		fmt.Fprintf(b, "  - %s\n", o.Why)
	}
	fmt.Fprintf(b, "- **admission rate** (%s): %d admitted over %d s of the room's clock from the opening, across %d replicas; busiest second (#%d) %d "+
		"for a setting of %.4g (allowed %.4g + %.0f slack + %.0f owed from before it); most ahead of the setting since the opening %.0f (allowed 1); "+
		"mean over the full seconds %.1f/s; per second %v\n",
		passWord(r.Passed), r.Admitted, len(r.Seconds), r.Replicas, r.Busiest, r.Max, r.Setting, r.Setting, r.Slack, r.CatchUp, r.Ahead, r.Mean, r.Seconds)
	eta := passWord(e.Passed)
	if j.Fault != nil {
		eta = "not judged: a fault"
	}
	fmt.Fprintf(b, "- **ETA** (%s): over %d admitted visitors (%d given it at their join), relative error beyond the second it states p50 %s, p90 %s; "+
		"plain |ETA − wait| ÷ wait p50 %s, p90 %s\n",
		eta, e.Pairs, e.AtJoin, pct(e.P50), pct(e.P90), pct(e.RawP50), pct(e.RawP90))
	if fj := j.Fault; fj != nil {
		fmt.Fprintf(b, "- **fault %s** (%s): at %s, %s; back after %.1f s. In line then: %d, of them %d kept their place, %d told another (%d might: joined in the last %s before the kill); "+
			"%d visitors got no answer and moved to the next replica; %d joins again after not_joined; %d passes issued before it taken after it, %d refused\n",
			fj.Kind, passWord(fj.Passed), fj.At.Format("15:04:05.000"), fj.Detail, fj.Down, fj.InLine, fj.Kept, len(fj.Moved), fj.MayMove, lossWindow,
			fj.Unanswered, fj.Rejoins, fj.PassesAcross, len(fj.PassesRefused))
		for _, m := range append(append([]string(nil), fj.Moved...), fj.PassesRefused...) {
			fmt.Fprintf(b, "  - %s\n", m)
		}
		if fj.Err != "" {
			fmt.Fprintf(b, "  - %s\n", fj.Err)
		}
		if fj.InLine == 0 {
			b.WriteString("  - nobody was in line when it struck: it tested nothing (a later -room-fault-at, a bigger -crowd)\n")
		}
	}
	fmt.Fprintf(b, "- **fouls** (%s): %d purchases without a valid pass of the buyer's own, %d refused 403, %d accepted: %s\n",
		passWord(j.Fouls.Passed), j.Fouls.Sent, j.Fouls.Refused, j.Fouls.Accepted, counts(j.Fouls.Answers))
	if len(j.Fouls.Untested) > 0 {
		fmt.Fprintf(b, "  - never refused by the pass check itself: %s\n", strings.Join(j.Fouls.Untested, ", "))
	}
	fmt.Fprintf(b, "- **audit** (%s): initial %d, stock %d, reserved %d, ordered %d, oversold %d; visitors' outcomes: %s\n",
		sl.Audit, sl.Facts.InitialStock, sl.Facts.Stock, sl.Facts.ReservedUnits, sl.Facts.OrderUnits, sl.Oversold, counts(j.Outcomes))
	for _, v := range sl.Violations {
		fmt.Fprintf(b, "  - %s\n", v)
	}
	b.WriteString("\n")
}

func ratio64(x float64, n int) float64 {
	if n == 0 {
		return math.NaN()
	}
	return x / float64(n)
}

func passWord(ok bool) string {
	if ok {
		return "pass"
	}
	return "FAIL"
}

func pct(x float64) string {
	if math.IsNaN(x) {
		return "–"
	}
	return fmt.Sprintf("%.1f %%", 100*x)
}

func num(x float64) string {
	if math.IsNaN(x) {
		return "–"
	}
	return fmt.Sprintf("%.3f", x)
}

func counts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s ×%d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// WriteReport writes the report as <dir>/<run id>.md and .json.
func WriteReport(dir string, r *Report) ([]string, error) {
	return attack.WriteFiles(dir, r.RunID, r, cli.Text{Ext: ".md", Body: Markdown(r)})
}
