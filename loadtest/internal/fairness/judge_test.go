package fairness

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"
)

// plantedSale is a made-up sale's visitors: n of them, the first bots joining at the opening,
// the honest ones spread over the pre-queue and after it, placed in line by place (given the
// visitors in the order they joined), the first admitted of them buying stock units at rate per
// second from the opening.
type plantedSale struct {
	n, bots, stock, admitted int
	preShare                 float64 // the honest buyers' share that joins before the opening
	rate                     float64
	place                    func(joined []*Visitor, rng *rand.Rand) // sets Ticket
}

var opening = time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)

func (p plantedSale) visitors(seed uint64) []*Visitor {
	rng := rand.New(rand.NewPCG(seed, seed))
	vs := make([]*Visitor, p.n)
	for i := range vs {
		v := &Visitor{User: fmt.Sprintf("v%d", i), Bot: i < p.bots}
		switch {
		case v.Bot:
			v.JoinSent = opening.Add(-6*time.Second + time.Duration(i)*time.Millisecond)
		case rng.Float64() < p.preShare:
			v.JoinSent = opening.Add(-6*time.Second + 50*time.Millisecond + time.Duration(rng.Int64N(int64(6*time.Second-100*time.Millisecond))))
		default:
			v.JoinSent = opening.Add(time.Duration(rng.Int64N(int64(3 * time.Second))))
		}
		v.PreQueue = v.JoinSent.Before(opening)
		vs[i] = v
	}
	joined := append([]*Visitor(nil), vs...)
	sortByJoin(joined)
	p.place(joined, rng)
	byPlace := append([]*Visitor(nil), vs...)
	sortByTicket(byPlace)
	for k, v := range byPlace[:p.admitted] {
		at := opening.Add(time.Duration(float64(k+1) / p.rate * float64(time.Second)))
		v.AdmittedSecond, v.AdmittedSeen, v.LastWaiting = at.Unix(), at.Add(100*time.Millisecond), at.Add(-100*time.Millisecond)
		v.ETAAt, v.ETA, v.ETAAtJoin = v.JoinSent, at.Sub(v.JoinSent).Round(time.Second)+time.Second/2, true
		status, code := http.StatusAccepted, ""
		if k >= p.stock {
			status, code = http.StatusConflict, "sold_out"
		}
		v.Purchases = append(v.Purchases, Purchase{Key: v.User + "-k1", Status: status, Code: code, OrderID: "o-" + v.User})
		v.Outcome = "bought"
		if code != "" {
			v.Outcome = code
		}
		if v.Bot {
			v.Purchases = append(v.Purchases, Purchase{Foul: "no_pass", Status: http.StatusForbidden, Code: "admission_pass_required"},
				Purchase{Foul: "forged_pass", Status: http.StatusForbidden, Code: "admission_pass_invalid"},
				Purchase{Foul: "foreign_pass", Status: http.StatusTooManyRequests, Code: "rate_limited"},
				Purchase{Foul: "foreign_pass", Status: http.StatusForbidden, Code: "admission_pass_invalid"})
		}
	}
	for _, v := range byPlace[p.admitted:] {
		v.Outcome = "queue_sold_out"
	}
	return vs
}

func sortByJoin(vs []*Visitor) {
	for i := 1; i < len(vs); i++ {
		for j := i; j > 0 && vs[j].JoinSent.Before(vs[j-1].JoinSent); j-- {
			vs[j], vs[j-1] = vs[j-1], vs[j]
		}
	}
}

func sortByTicket(vs []*Visitor) {
	for i := 1; i < len(vs); i++ {
		for j := i; j > 0 && vs[j].Ticket < vs[j-1].Ticket; j-- {
			vs[j], vs[j-1] = vs[j-1], vs[j]
		}
	}
}

// The rooms' orders: in order of joining; the pre-queue shuffled, then in order; the pre-queue
// with the bots first (the unfair one), then shuffled; and the pre-queue in order of joining
// where a shuffle was promised.
func fifoPlaces(joined []*Visitor, _ *rand.Rand) {
	for i, v := range joined {
		v.Ticket = int64(i + 1)
	}
}

func shuffledPlaces(joined []*Visitor, rng *rand.Rand) {
	var pre []*Visitor
	for _, v := range joined {
		if v.PreQueue {
			pre = append(pre, v)
		}
	}
	for i, k := range rng.Perm(len(pre)) {
		pre[k].Ticket = int64(i + 1)
	}
	placeAfter(joined, len(pre))
}

func botsFirstPlaces(joined []*Visitor, rng *rand.Rand) {
	var bots, honest []*Visitor
	for _, v := range joined {
		switch {
		case v.PreQueue && v.Bot:
			bots = append(bots, v)
		case v.PreQueue:
			honest = append(honest, v)
		}
	}
	for i, v := range bots {
		v.Ticket = int64(i + 1)
	}
	for i, k := range rng.Perm(len(honest)) {
		honest[k].Ticket = int64(len(bots) + i + 1)
	}
	placeAfter(joined, len(bots)+len(honest))
}

func placeAfter(joined []*Visitor, from int) {
	next := int64(from)
	for _, v := range joined {
		if !v.PreQueue {
			next++
			v.Ticket = next
		}
	}
}

func TestJudgeRoom(t *testing.T) {
	base := plantedSale{n: 400, bots: 40, stock: 150, admitted: 180, preShare: 2.0 / 3, rate: 20}
	for _, tc := range []struct {
		name        string
		variant     string
		place       func([]*Visitor, *rand.Rand)
		wantFair    bool
		wantOrder   bool
		wantOrderIn string // a word of Order.Why when it fails
	}{
		{"fifo room, in order of joining", VariantFIFO, fifoPlaces, true, true, ""},
		{"shuffled pre-queue, drawn fairly", VariantShuffle, shuffledPlaces, true, true, ""},
		// The negative controls: the judge must catch each. The bots joined first, so placing
		// them first also ties the places to the order of joining.
		{"shuffle promised, the bots placed first", VariantShuffle, botsFirstPlaces, false, false, "follow the order of joining"},
		{"shuffle promised, the pre-queue kept in order", VariantShuffle, fifoPlaces, false, false, "follow the order of joining"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := base
			p.place = tc.place
			for seed := range uint64(5) {
				vs := p.visitors(seed)
				j := JudgeRoom(vs, tc.variant, p.rate, 100*time.Millisecond, 3, opening)
				f, o := j.Fairness, j.Order
				if f.Passed != tc.wantFair {
					t.Errorf("seed %d: fairness passed %v, want %v: bots %d units of %d, %d admitted, lottery %+v", seed, f.Passed, tc.wantFair, f.BotsUnits, f.Units, f.BotsAdmitted, f.Lottery)
				}
				if o.Passed != tc.wantOrder || !strings.Contains(o.Why, tc.wantOrderIn) {
					t.Errorf("seed %d: order passed %v (%q), want %v (%q): %+v", seed, o.Passed, o.Why, tc.wantOrder, tc.wantOrderIn, o)
				}
				if tc.variant == VariantShuffle && tc.name == "shuffle promised, the bots placed first" && !(o.BotsAhead.P < 0.01) {
					t.Errorf("seed %d: bots placed first, Mann-Whitney p %v, want ≈ 0", seed, o.BotsAhead.P)
				}
				if !j.Rate.Passed || j.Rate.Max > 20 || j.Rate.Slack != 5 {
					t.Errorf("seed %d: admissions planted at 20/s: %+v", seed, j.Rate)
				}
				if !j.ETA.Passed || !j.Fouls.Passed || len(j.Violations) > 0 {
					t.Errorf("seed %d: eta %+v, fouls %+v, violations %v", seed, j.ETA, j.Fouls, j.Violations)
				}
				if len(j.Accepted) != p.stock {
					t.Errorf("seed %d: %d orders accepted, want %d", seed, len(j.Accepted), p.stock)
				}
			}
		})
	}
}

func TestJudgeRoomCatches(t *testing.T) {
	p := plantedSale{n: 400, bots: 40, stock: 150, admitted: 180, preShare: 2.0 / 3, rate: 20, place: shuffledPlaces}
	t.Run("admissions over the rate", func(t *testing.T) {
		vs := p.visitors(1)
		n := 0
		for _, v := range vs {
			if v.Admitted() && n < 30 {
				v.AdmittedSecond = opening.Unix() + 2 // 30 in one second, and the rest
				n++
			}
		}
		if r := judgeRate(vs, 20, 100*time.Millisecond, 3, opening); r.Passed || r.Max < 30 {
			t.Errorf("30+ admissions in one second at 20/s passed: %+v", r)
		}
	})
	for _, tc := range []struct {
		name    string
		seconds []int
		want    bool
	}{
		{"steady", []int{20, 20, 20, 20, 5}, true},
		// A stall, then the room catches up what it owed, a second's worth at most: the CI run's
		// [13 20 26 20 20 11].
		{"a slow start caught up", []int{13, 20, 26, 20, 20, 11}, true},
		{"a stall of two seconds, a second's worth caught up", []int{0, 0, 40, 20, 20}, true},
		{"a stall of two seconds, more than a second's worth caught up", []int{0, 0, 50, 20}, false},
		{"over the slack with nothing owed", []int{20, 26, 14, 20}, false},
		{"within the slack, but ahead of the rate since the opening", []int{20, 25, 15, 20}, false},
		{"within the slack, not ahead", []int{19, 21, 20, 20}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var vs []*Visitor
			for k, n := range tc.seconds {
				for range n {
					vs = append(vs, &Visitor{AdmittedSecond: opening.Unix() + int64(k)})
				}
			}
			if r := judgeRate(vs, 20, 100*time.Millisecond, 3, opening); r.Passed != tc.want {
				t.Errorf("%v: passed %v, want %v: %+v", tc.seconds, r.Passed, tc.want, r)
			}
		})
	}
	t.Run("an ETA twice the wait", func(t *testing.T) {
		vs := p.visitors(1)
		for _, v := range vs {
			v.ETA *= 2
		}
		if e := judgeETA(vs); e.Passed || e.P50 < 0.5 {
			t.Errorf("ETAs doubled passed: %+v", e)
		}
	})
	t.Run("a purchase without a pass accepted", func(t *testing.T) {
		vs := p.visitors(1)
		vs[0].Purchases = append(vs[0].Purchases, Purchase{Foul: "foreign_pass", Status: http.StatusAccepted, OrderID: "stolen"})
		if f := judgeFouls(vs); f.Passed || f.Accepted != 1 {
			t.Errorf("a foul accepted passed: %+v", f)
		}
	})
	t.Run("fouls refused only by the sale's window", func(t *testing.T) {
		vs := p.visitors(1)
		for _, v := range vs {
			for i, q := range v.Purchases {
				if q.Foul == "forged_pass" {
					v.Purchases[i].Code = "sale_not_started"
				}
			}
		}
		if f := judgeFouls(vs); f.Passed || len(f.Untested) != 1 || f.Untested[0] != "forged_pass" {
			t.Errorf("forged passes never reaching the pass check passed: %+v", f)
		}
	})
	t.Run("a buyer accepted twice, a retry told of another order", func(t *testing.T) {
		vs := p.visitors(1)
		var v *Visitor
		for _, w := range vs {
			if boughtUnit(w) {
				v = w
				break
			}
		}
		v.Purchases = append(v.Purchases, Purchase{Key: v.User + "-k1", Status: http.StatusAccepted, OrderID: "other"})
		_, violations := tallyPurchases(vs)
		if len(violations) != 2 {
			t.Errorf("violations %q, want the retry's and the second order's", violations)
		}
	})
}
