package fairness

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"
)

// The judge's thresholds (docs/loadtest.md says why each).
const (
	// MinFIFORho is the least Spearman ρ between join time and place in line that a FIFO room
	// (and a shuffled one after its pre-queue) may show: "near 1". Only joins sent within a few
	// milliseconds of each other may swap on their way to the room.
	MinFIFORho = 0.95
	// MinIndependenceP is the least p-value of the shuffled pre-queue's χ² test of independence
	// between join time and place that passes: below it, the draw kept the order of joining.
	// 0.001, not 0.01: CI judges two shuffled rooms a run, and at 0.01 one fair draw in a hundred
	// failed it (a fresh-clone run saw p 0.0015); a kept order gives p ≈ 1e-12, a half-kept one
	// fails 1,000 of 1,000 at 137 visitors (TestChiSquareIndependence).
	MinIndependenceP = 0.001
	// MaxETAMedianError is the most the median relative error of the ETA may be.
	MaxETAMedianError = 0.25
	// minOrderPairs is the fewest visitors an order test runs on.
	minOrderPairs = 10
)

// Fairness is the bots' take against their fair share: the room's promise is about the order of
// admission, so Lottery is what a fair room gives the bots among the visitors it admitted
// (FIFO: their places by arrival, fixed; shuffled: a hypergeometric draw from the pre-queue),
// and bots' units must not exceed its bound (units ≤ admissions).
type Fairness struct {
	Crowd          int     `json:"crowd"`
	Bots           int     `json:"bots"`
	CrowdShare     float64 `json:"crowd_share"`       // bots ÷ crowd
	PreQueue       int     `json:"pre_queue"`         // visitors who joined before the sale started
	BotsInPreQueue int     `json:"bots_in_pre_queue"` //
	Admitted       int     `json:"admitted"`
	BotsAdmitted   int     `json:"bots_admitted"`
	Units          int     `json:"units"` // units the crowd was told it bought (202s, distinct orders)
	BotsUnits      int     `json:"bots_units"`
	UnitsShare     float64 `json:"units_share"` // bots' units ÷ units
	// HonestOutrun are honest buyers admitted whose purchase found the units gone: the race
	// among the admitted, which fast hands win and the room does not decide.
	HonestOutrun int     `json:"honest_outrun"`
	Lottery      Lottery `json:"lottery"`
	Passed       bool    `json:"passed"`
}

// Order is how the places in line follow the order of joining.
type Order struct {
	// Rho is Spearman's ρ of join time and place: every visitor in a FIFO room, those who joined
	// after the opening in a shuffled one (RhoPairs of them).
	Rho      float64 `json:"rho"`
	RhoPairs int     `json:"rho_pairs"`
	// The shuffled pre-queue's tests: χ² of independence of join time and place, Spearman's ρ
	// there with its p, and the Mann-Whitney test that the bots' places are ahead.
	PreChi    *ChiSquare   `json:"pre_chi_square,omitempty"`
	PreRho    float64      `json:"pre_rho,omitempty"`
	PreRhoP   float64      `json:"pre_rho_p,omitempty"`
	BotsAhead *MannWhitney `json:"bots_ahead,omitempty"`
	// AfterBehind is false when a visitor who joined after the opening got a place before one of
	// the pre-queue's.
	AfterBehind bool   `json:"after_behind"`
	Unknown     int    `json:"unknown"` // visitors who never learnt their place
	Passed      bool   `json:"passed"`
	Why         string `json:"why,omitempty"`
}

// Rate is the admissions per second on the room's clock against the setting.
type Rate struct {
	Setting float64 `json:"setting"`
	Slack   float64 `json:"slack"` // RateSlack
	// Seconds are the admissions in each second from the opening (the sale's start).
	Seconds []int `json:"seconds"`
	// Max is the most admissions in one second, Busiest which second (from 0), and CatchUp what
	// that second was allowed above the setting for admissions owed from before it.
	Max     int     `json:"max"`
	Busiest int     `json:"busiest"`
	CatchUp float64 `json:"catch_up"`
	// Excess is the largest count above a second's allowance (setting + slack + catch-up): ≤ 0
	// passes. Ahead is the largest count since the opening above the setting × the seconds
	// elapsed (the room's own rule; ≤ 1 passes, for the count's floor).
	Excess   float64 `json:"excess"`
	Ahead    float64 `json:"ahead"`
	Mean     float64 `json:"mean"`     // over the full seconds between the first and the last
	Replicas int     `json:"replicas"` // the replicas serving the sale, each with its ticker
	Admitted int     `json:"admitted"`
	Passed   bool    `json:"passed"`
}

// ETA is the error of the estimated wait: the first ETA a visitor was given against its real
// wait until its admission.
type ETA struct {
	Pairs  int     `json:"pairs"`
	AtJoin int     `json:"at_join"` // of them, given at the join (the rest: at the first poll after a shuffle's draw)
	P50    float64 `json:"p50"`
	P90    float64 `json:"p90"`
	// RawP50 and RawP90 are the plain |ETA − wait| ÷ wait, the second the ETA rounds up to
	// included: what a visitor reading the figure as exact sees.
	RawP50 float64 `json:"raw_p50"`
	RawP90 float64 `json:"raw_p90"`
	Passed bool    `json:"passed"`
}

// Fouls are the bots' purchases without a valid pass of their own, by kind and answer.
type Fouls struct {
	Sent     int            `json:"sent"`
	Refused  int            `json:"refused_403"`
	Answers  map[string]int `json:"answers"` // "no_pass 403 admission_pass_required": count
	Accepted int            `json:"accepted"`
	// Untested are the kinds never refused by the pass check itself.
	Untested []string `json:"untested,omitempty"`
	Passed   bool     `json:"passed"`
}

// Judgement is the room's side of one sale: what the visitors show.
type Judgement struct {
	Fairness Fairness `json:"fairness"`
	Order    Order    `json:"order"`
	Rate     Rate     `json:"rate"`
	ETA      ETA      `json:"eta"`
	Fouls    Fouls    `json:"fouls"`
	// Fault is the fault played while the crowd waited (-room-fault), nil without one.
	Fault    *FaultJudgement `json:"fault,omitempty"`
	Outcomes map[string]int  `json:"outcomes"`
	// Accepted are the distinct order ids the visitors were told of; Violations what their
	// answers show broken (a buyer accepted twice, a retry told of another order, a 500, a sale
	// id other than the sale's).
	Accepted   []string `json:"-"`
	Violations []string `json:"violations,omitempty"`
}

// JudgeRoom reads the visitors of one sale of the given variant, admitted at setting per second
// from opens (the sale's start) with the replicas' tick, and computes every figure of the room's
// side.
func JudgeRoom(visitors []*Visitor, variant string, setting float64, tick time.Duration, replicas int, opens time.Time) Judgement {
	j := Judgement{Outcomes: map[string]int{}}
	for _, v := range visitors {
		j.Outcomes[v.Outcome]++
	}
	j.Accepted, j.Violations = tallyPurchases(visitors)
	j.Fairness = judgeFairness(visitors, variant)
	j.Order = judgeOrder(visitors, variant)
	j.Rate = judgeRate(visitors, setting, tick, replicas, opens)
	j.ETA = judgeETA(visitors)
	j.Fouls = judgeFouls(visitors)
	return j
}

// Passed reports whether every check of the room passed. Under a fault the ETA is not judged:
// the wait it estimated did not count on the outage.
func (j Judgement) Passed() bool {
	if j.Fault != nil {
		return j.Fairness.Passed && j.Order.Passed && j.Rate.Passed && j.Fouls.Passed && j.Fault.Passed
	}
	return j.Fairness.Passed && j.Order.Passed && j.Rate.Passed && j.ETA.Passed && j.Fouls.Passed
}

// tallyPurchases returns the distinct order ids acknowledged with a 202 and what the answers
// show broken.
func tallyPurchases(visitors []*Visitor) ([]string, []string) {
	var accepted, violations []string
	seen := map[string]bool{}
	sales := map[string]int{}
	for _, v := range visitors {
		if v.Sale != "" {
			sales[v.Sale]++
		}
		orders := map[string]bool{}
		orderOfKey := map[string]string{}
		for _, p := range v.Purchases {
			if p.Status == http.StatusInternalServerError {
				violations = append(violations, fmt.Sprintf("a 500 answered %s's purchase", v.User))
			}
			if p.Status != http.StatusAccepted {
				continue
			}
			if prev, ok := orderOfKey[p.Key]; ok && prev != p.OrderID {
				violations = append(violations, fmt.Sprintf("%s's retry with key %s got order %s, its first answer %s", v.User, p.Key, p.OrderID, prev))
			}
			orderOfKey[p.Key] = p.OrderID
			orders[p.OrderID] = true
			if !seen[p.OrderID] {
				seen[p.OrderID] = true
				accepted = append(accepted, p.OrderID)
			}
		}
		if len(orders) > 1 {
			violations = append(violations, fmt.Sprintf("%s was accepted %d times (limit 1)", v.User, len(orders)))
		}
	}
	if len(sales) > 1 {
		violations = append(violations, fmt.Sprintf("the crowd was told of %d sales, not one: %v (a replica's board behind the reset: raise -lead)", len(sales), sales))
	}
	return accepted, violations
}

// judgeFairness compares the bots' units with the Lottery of the variant's promise.
func judgeFairness(visitors []*Visitor, variant string) Fairness {
	f := Fairness{Crowd: len(visitors)}
	for _, v := range visitors {
		bought := boughtUnit(v)
		if v.Bot {
			f.Bots++
		}
		if v.PreQueue {
			f.PreQueue++
			if v.Bot {
				f.BotsInPreQueue++
			}
		}
		if v.Admitted() {
			f.Admitted++
			if v.Bot {
				f.BotsAdmitted++
			}
			if !v.Bot && !bought && v.Outcome == "sold_out" {
				f.HonestOutrun++
			}
		}
		if bought {
			f.Units++
			if v.Bot {
				f.BotsUnits++
			}
		}
	}
	f.CrowdShare = ratio(f.Bots, f.Crowd)
	f.UnitsShare = ratio(f.BotsUnits, f.Units)
	f.Lottery = promisedBots(visitors, variant, f.Admitted)
	f.Passed = float64(f.BotsUnits) <= f.Lottery.Bound && float64(f.BotsAdmitted) <= f.Lottery.Bound
	return f
}

// boughtUnit reports whether the visitor was told a purchase of its own pass was accepted.
func boughtUnit(v *Visitor) bool {
	for _, p := range v.Purchases {
		if p.Status == http.StatusAccepted {
			return true
		}
	}
	return false
}

// promisedBots is the bots' Lottery among the first admitted places under the variant's
// promise: FIFO, the order of joining (fixed); shuffle, a random order of the pre-queue, then
// the order of joining.
func promisedBots(visitors []*Visitor, variant string, admitted int) Lottery {
	joined := slices.Clone(visitors)
	joined = slices.DeleteFunc(joined, func(v *Visitor) bool { return v.JoinSent.IsZero() })
	sort.SliceStable(joined, func(a, b int) bool { return joined[a].JoinSent.Before(joined[b].JoinSent) })
	botsAmongFirst := func(vs []*Visitor, n int) int {
		c := 0
		for _, v := range vs[:min(n, len(vs))] {
			if v.Bot {
				c++
			}
		}
		return c
	}
	if variant != VariantShuffle {
		return Draw(0, 0, 0, botsAmongFirst(joined, admitted))
	}
	var pre, after []*Visitor
	botsPre := 0
	for _, v := range joined {
		if v.PreQueue {
			pre = append(pre, v)
			if v.Bot {
				botsPre++
			}
		} else {
			after = append(after, v)
		}
	}
	if admitted <= len(pre) {
		return Draw(len(pre), botsPre, admitted, 0)
	}
	l := Draw(len(pre), botsPre, len(pre), botsAmongFirst(after, admitted-len(pre)))
	l.Drawn = admitted
	return l
}

// judgeOrder tests the places against the order of joining: FIFO, ρ near 1 over everyone;
// shuffle, independence within the pre-queue (χ²), ρ near 1 after it, and every later joiner
// behind the whole pre-queue.
func judgeOrder(visitors []*Visitor, variant string) Order {
	o := Order{AfterBehind: true}
	var pre, after []*Visitor
	for _, v := range visitors {
		switch {
		case v.JoinSent.IsZero():
		case v.Ticket == 0:
			o.Unknown++
		case variant == VariantShuffle && v.PreQueue:
			pre = append(pre, v)
		default:
			after = append(after, v)
		}
	}
	ordered := after // FIFO: everyone
	x, y := joinAndPlace(ordered)
	o.Rho, o.RhoPairs = Spearman(x, y), len(ordered)
	o.Passed = true
	fail := func(why string) {
		o.Passed = false
		if o.Why == "" {
			o.Why = why
		}
	}
	if len(ordered) >= minOrderPairs && !(o.Rho >= MinFIFORho) {
		fail(fmt.Sprintf("ρ %.3f of join time and place below %.2f", o.Rho, MinFIFORho))
	}
	if variant != VariantShuffle {
		if len(ordered) < minOrderPairs {
			fail(fmt.Sprintf("only %d visitors learnt their place", len(ordered)))
		}
		return o
	}
	px, py := joinAndPlace(pre)
	chi := ChiSquareIndependence(px, py, 4)
	o.PreChi = &chi
	o.PreRho = Spearman(px, py)
	o.PreRhoP = SpearmanP(o.PreRho, len(pre))
	var botPlaces, honestPlaces []float64
	maxPre := int64(0)
	for _, v := range pre {
		maxPre = max(maxPre, v.Ticket)
		if v.Bot {
			botPlaces = append(botPlaces, float64(v.Ticket))
		} else {
			honestPlaces = append(honestPlaces, float64(v.Ticket))
		}
	}
	mw := MannWhitneyLess(botPlaces, honestPlaces)
	o.BotsAhead = &mw
	for _, v := range after {
		if v.Ticket < maxPre {
			o.AfterBehind = false
		}
	}
	switch {
	case math.IsNaN(chi.P):
		fail(fmt.Sprintf("a pre-queue of %d is too small for the χ² test", len(pre)))
	case chi.P <= MinIndependenceP:
		fail(fmt.Sprintf("the pre-queue's places follow the order of joining: χ² p %.2g ≤ %.2g", chi.P, MinIndependenceP))
	case !o.AfterBehind:
		fail("a visitor who joined after the opening got a place ahead of the pre-queue's")
	}
	return o
}

// joinAndPlace are the visitors' join times (ns) and places.
func joinAndPlace(vs []*Visitor) (x, y []float64) {
	for _, v := range vs {
		x = append(x, float64(v.JoinSent.UnixNano()))
		y = append(y, float64(v.Ticket))
	}
	return x, y
}

// RateSlack is how far above the setting one second of admissions may go, beside a catch-up:
// the room counts its rate from the opening on its own clock, so a second holds more than the
// setting only by what accrued before it and was admitted inside it — what accrued since the last
// admission call before it, one tick's worth when the tickers keep time — and one for the count's
// floor. A second tick's worth covers a ticker held up on a loaded machine (the replicas and the
// crowd share two cores here).
func RateSlack(setting float64, tick time.Duration) float64 {
	return math.Ceil(2*setting*tick.Seconds()) + 1
}

// judgeRate counts the admissions per second of the room's clock (each admitted visitor's pass)
// from opens, the opening of admission, and holds them against the setting two ways, the room's
// own rules: since the opening no more than the setting × the seconds elapsed; in any one second
// no more than the setting + RateSlack + what was owed from before it (admissions the rate had
// allowed and the room had not made, after a stall or a lull), at most a second's worth, which the
// room catches up at once.
func judgeRate(visitors []*Visitor, setting float64, tick time.Duration, replicas int, opens time.Time) Rate {
	r := Rate{Setting: setting, Slack: RateSlack(setting, tick), Replicas: replicas, Excess: math.Inf(-1), Ahead: math.Inf(-1)}
	var secs []int64
	early := false
	for _, v := range visitors {
		if v.Admitted() {
			secs = append(secs, v.AdmittedSecond)
			early = early || v.AdmittedSecond < opens.Unix()
		}
	}
	r.Admitted = len(secs)
	if len(secs) == 0 || early {
		return r
	}
	r.Seconds = PerSecond(append(secs, opens.Unix()))
	r.Seconds[0]-- // the opening's second, added to start the count there
	burst := max(1, math.Floor(setting))
	cum := 0
	for k, n := range r.Seconds {
		owed := min(burst, max(0, setting*float64(k)-float64(cum)))
		if n > r.Max {
			r.Max, r.Busiest, r.CatchUp = n, k, owed
		}
		r.Excess = max(r.Excess, float64(n)-(setting+r.Slack+owed))
		cum += n
		r.Ahead = max(r.Ahead, float64(cum)-setting*float64(k+1))
	}
	if len(r.Seconds) > 2 {
		full := r.Seconds[1 : len(r.Seconds)-1]
		sum := 0
		for _, n := range full {
			sum += n
		}
		r.Mean = float64(sum) / float64(len(full))
	}
	r.Passed = r.Excess <= 0 && r.Ahead <= 1
	return r
}

// judgeETA compares each admitted visitor's first ETA with its wait from then to its
// admission, as ETAErrors does: the API states it in whole seconds, rounded up. The admission's moment is the middle of what the visitor knows of it: after its
// last "not yet", before its first "admitted", within the second its pass names.
func judgeETA(visitors []*Visitor) ETA {
	var est, actual []time.Duration
	e := ETA{}
	for _, v := range visitors {
		if !v.Admitted() || v.ETAAt.IsZero() {
			continue
		}
		at := admittedAt(v)
		est = append(est, v.ETA)
		actual = append(actual, at.Sub(v.ETAAt))
		if v.ETAAtJoin {
			e.AtJoin++
		}
	}
	errs := ETAErrors(est, actual, time.Second)
	e.Pairs = len(errs)
	e.P50, e.P90 = Quantile(errs, 0.5), Quantile(errs, 0.9)
	raw := ETAErrors(est, actual, 0)
	e.RawP50, e.RawP90 = Quantile(raw, 0.5), Quantile(raw, 0.9)
	e.Passed = e.Pairs > 0 && e.P50 <= MaxETAMedianError
	return e
}

// admittedAt estimates when v was admitted (see judgeETA).
func admittedAt(v *Visitor) time.Time {
	lo, hi := time.Unix(v.AdmittedSecond, 0), time.Unix(v.AdmittedSecond+1, 0)
	if v.LastWaiting.After(lo) {
		lo = v.LastWaiting
	}
	if v.AdmittedSeen.Before(hi) {
		hi = v.AdmittedSeen
	}
	if hi.Before(lo) { // the clocks disagree: trust what the visitor saw
		return v.AdmittedSeen
	}
	return lo.Add(hi.Sub(lo) / 2)
}

// FoulKinds are the ways a bot tries to buy without a valid pass of its own.
var FoulKinds = []string{"no_pass", "forged_pass", "foreign_pass"}

// judgeFouls checks that every purchase without a valid pass of the buyer's own was refused:
// 403, or 429 back-pressure before the check; never a 202. It passes when each kind was tried
// and refused at least once by the pass check itself (an admission_pass_* code: a 403 of the
// sale's window says nothing of the pass).
func judgeFouls(visitors []*Visitor) Fouls {
	f := Fouls{Answers: map[string]int{}, Passed: true}
	checked := map[string]bool{}
	for _, v := range visitors {
		for _, p := range v.Purchases {
			if p.Foul == "" {
				continue
			}
			f.Sent++
			f.Answers[fmt.Sprintf("%s %d %s", p.Foul, p.Status, p.Code)]++
			switch p.Status {
			case http.StatusForbidden:
				f.Refused++
				if strings.HasPrefix(p.Code, "admission_pass_") {
					checked[p.Foul] = true
				}
			case http.StatusTooManyRequests, 0:
			default:
				f.Passed = false
				if p.Status == http.StatusAccepted {
					f.Accepted++
				}
			}
		}
	}
	for _, k := range FoulKinds {
		if !checked[k] {
			f.Passed = false
			f.Untested = append(f.Untested, k)
		}
	}
	return f
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
