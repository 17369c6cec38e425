package fairness

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestRanks(t *testing.T) {
	got := Ranks([]float64{10, 30, 20, 20, 5})
	want := []float64{2, 5, 3.5, 3.5, 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Ranks (-want +got):\n%s", diff)
	}
}

func TestSpearman(t *testing.T) {
	for _, tc := range []struct {
		name string
		x, y []float64
		want float64
	}{
		{"same order", []float64{1, 2, 3, 4, 5}, []float64{10, 20, 30, 40, 50}, 1},
		{"reversed", []float64{1, 2, 3, 4, 5}, []float64{5, 4, 3, 2, 1}, -1},
		{"monotone, not linear", []float64{1, 2, 3, 4, 5}, []float64{1, 4, 9, 16, 1000}, 1},
		// Σd² = 2 over n = 5: 1 − 6·2/(5·24) = 0.9.
		{"one swap", []float64{1, 2, 3, 4, 5}, []float64{1, 2, 4, 3, 5}, 0.9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Spearman(tc.x, tc.y); math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("Spearman = %v, want %v", got, tc.want)
			}
		})
	}
	if got := Spearman([]float64{1, 1, 1}, []float64{1, 2, 3}); !math.IsNaN(got) {
		t.Errorf("Spearman of a constant = %v, want NaN", got)
	}
}

func TestDistributions(t *testing.T) {
	for _, tc := range []struct {
		name      string
		got, want float64
	}{
		// χ² survival values from tables: P(χ²_1 ≥ 3.841) = 0.05, P(χ²_9 ≥ 21.666) = 0.01,
		// P(χ²_2 ≥ x) = exp(−x/2).
		{"chi2 df1 3.841", ChiSquareSurvival(3.841459, 1), 0.05},
		{"chi2 df9 21.666", ChiSquareSurvival(21.665994, 9), 0.01},
		{"chi2 df2 4", ChiSquareSurvival(4, 2), math.Exp(-2)},
		{"chi2 df9 large", ChiSquareSurvival(200, 9), 0},
		// Student t: the two-sided p of t = 2.228 on 10 df is 0.05; of t = 0, 1.
		{"spearman p", SpearmanP(2.228139/math.Sqrt(10+2.228139*2.228139), 12), 0.05},
		{"spearman p of 0", SpearmanP(0, 50), 1},
	} {
		if math.Abs(tc.got-tc.want) > 1e-4 {
			t.Errorf("%s: %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}

func TestChiSquareIndependence(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	n := 240
	x := make([]float64, n)
	for i := range x {
		x[i] = float64(i)
	}
	shuffled := make([]float64, n)
	for i, p := range rng.Perm(n) {
		shuffled[i] = float64(p + 1)
	}
	indep := ChiSquareIndependence(x, shuffled, 4)
	if indep.Bins != 4 || indep.DF != 9 || !(indep.P > MinIndependenceP) {
		t.Errorf("a random permutation: %+v, want 4 bins, 9 df and p > %v", indep, MinIndependenceP)
	}
	// The negative control: a pre-queue placed in its order of joining must fail.
	ordered := ChiSquareIndependence(x, x, 4)
	if !(ordered.P < 1e-9) {
		t.Errorf("a planted ordered pre-queue: p = %v, want ≈ 0", ordered.P)
	}
	// Half-ordered (the first half in order, the rest random) fails too, at CI's size of a
	// pre-queue (137 visitors), every time.
	const pre = 137
	for trial := range 200 {
		half := make([]float64, pre)
		for i, p := range rng.Perm(pre) {
			half[i] = float64(p + 1)
		}
		for i := range pre / 2 {
			half[i] = float64(i + 1)
		}
		if got := ChiSquareIndependence(x[:pre], half, 4); !(got.P <= MinIndependenceP) {
			t.Fatalf("a half-ordered pre-queue of %d (trial %d): p = %v, want ≤ %v", pre, trial, got.P, MinIndependenceP)
		}
	}
	if got := ChiSquareIndependence(x[:15], x[:15], 4); !math.IsNaN(got.P) {
		t.Errorf("15 pairs: p = %v, want NaN (too few for 2 bins of %d expected)", got.P, MinExpected)
	}
}

// TestChiSquareFalseAlarms checks the χ² test's false alarm rate under independence: at
// p ≤ MinIndependenceP it must fail about that share of fair shuffles, not more.
func TestChiSquareFalseAlarms(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const trials, n = 2000, 200
	x := make([]float64, n)
	for i := range x {
		x[i] = float64(i)
	}
	alarms := 0
	for range trials {
		y := make([]float64, n)
		for i, p := range rng.Perm(n) {
			y[i] = float64(p)
		}
		if ChiSquareIndependence(x, y, 4).P <= MinIndependenceP {
			alarms++
		}
	}
	// Binomial(2000, 0.001): mean 2, sd 1.4; P(> 8) ≈ 2e-4.
	if alarms > 8 {
		t.Errorf("%d false alarms in %d fair shuffles, want about %d", alarms, trials, trials/1000)
	}
}

func TestMannWhitneyLess(t *testing.T) {
	botsFirst := MannWhitneyLess([]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, seq(11, 100))
	if !(botsFirst.P < 1e-6) || botsFirst.Z >= 0 {
		t.Errorf("bots first: %+v, want z < 0 and p ≈ 0", botsFirst)
	}
	spread := MannWhitneyLess([]float64{5, 15, 25, 35, 45, 55, 65, 75, 85, 95}, seq(1, 100))
	if !(spread.P > 0.3) {
		t.Errorf("bots spread evenly: %+v, want p near 0.5", spread)
	}
}

func seq(lo, hi int) []float64 {
	var out []float64
	for i := lo; i <= hi; i++ {
		out = append(out, float64(i))
	}
	return out
}

func TestDraw(t *testing.T) {
	// 100 drawn from a pool of 300 with 30 bots: mean 10, variance 100·0.1·0.9·200/299.
	got := Draw(300, 30, 100, 0)
	sd := math.Sqrt(100 * 0.1 * 0.9 * 200 / 299)
	want := Lottery{Pool: 300, Members: 30, Drawn: 100, Expected: 10, SD: sd, Bound: 10 + 3*sd + 1}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("Draw (-want +got):\n%s", diff)
	}
	// The whole pool drawn: no spread; fixed members add.
	if got := Draw(50, 10, 80, 3); got.Expected != 13 || got.SD != 0 || got.Bound != 14 {
		t.Errorf("Draw of the whole pool = %+v, want 13 expected, sd 0, bound 14", got)
	}
}

func TestETAErrorsAndQuantile(t *testing.T) {
	s := time.Second
	ms := time.Millisecond
	// An ETA of 10 s says (9 s, 10 s]: 9.5 s is right, 10 s right, 12.5 s 2.5 s late, 8 s 1 s
	// early; 300 ms under an ETA of 1 s is right; a wait of 0 has no relative error.
	errs := ETAErrors([]time.Duration{10 * s, 10 * s, 10 * s, 8 * s, s, 5 * s}, []time.Duration{9500 * ms, 10 * s, 12500 * ms, 5 * s, 300 * ms, 0}, s)
	if diff := cmp.Diff([]float64{0, 0, 0.2, 0.4, 0}, errs, cmpopts.EquateApprox(0, 1e-12)); diff != "" {
		t.Errorf("ETAErrors (-want +got):\n%s", diff)
	}
	// Step 0: the plain relative error.
	errs = ETAErrors([]time.Duration{10 * s, s}, []time.Duration{8 * s, 500 * ms}, 0)
	if diff := cmp.Diff([]float64{0.25, 1}, errs, cmpopts.EquateApprox(0, 1e-12)); diff != "" {
		t.Errorf("ETAErrors step 0 (-want +got):\n%s", diff)
	}
	errs = []float64{0, 0.2, 0.5}
	if got := Quantile(errs, 0.5); got != 0.2 {
		t.Errorf("median = %v, want 0.2", got)
	}
	if got := Quantile(errs, 0.9); got != 0.5 {
		t.Errorf("p90 = %v, want 0.5", got)
	}
	if got := Quantile(nil, 0.5); !math.IsNaN(got) {
		t.Errorf("median of nothing = %v, want NaN", got)
	}
}

func TestPerSecond(t *testing.T) {
	if diff := cmp.Diff([]int{2, 0, 1, 3}, PerSecond([]int64{100, 100, 102, 103, 103, 103})); diff != "" {
		t.Errorf("PerSecond (-want +got):\n%s", diff)
	}
}
