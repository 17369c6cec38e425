package fairness

import (
	"math"
	"slices"
	"sort"
	"time"
)

// Ranks returns the ranks of xs, from 1, ties sharing the mean of their ranks (the "fractional"
// ranks Spearman's ρ and the Mann-Whitney U are defined with).
func Ranks(xs []float64) []float64 {
	idx := make([]int, len(xs))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return xs[idx[a]] < xs[idx[b]] })
	r := make([]float64, len(xs))
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && xs[idx[j+1]] == xs[idx[i]] {
			j++
		}
		mean := float64(i+j)/2 + 1
		for k := i; k <= j; k++ {
			r[idx[k]] = mean
		}
		i = j + 1
	}
	return r
}

// Spearman is Spearman's rank correlation of x and y (Pearson's on their fractional ranks): 1
// when y grows with x, 0 when they are unrelated. NaN with fewer than 3 pairs, or when either
// side is constant.
func Spearman(x, y []float64) float64 {
	if len(x) != len(y) || len(x) < 3 {
		return math.NaN()
	}
	return pearson(Ranks(x), Ranks(y))
}

func pearson(x, y []float64) float64 {
	n := float64(len(x))
	var mx, my float64
	for i := range x {
		mx += x[i]
		my += y[i]
	}
	mx, my = mx/n, my/n
	var sxy, sxx, syy float64
	for i := range x {
		dx, dy := x[i]-mx, y[i]-my
		sxy += dx * dy
		sxx += dx * dx
		syy += dy * dy
	}
	if sxx == 0 || syy == 0 {
		return math.NaN()
	}
	return sxy / math.Sqrt(sxx*syy)
}

// SpearmanP is the two-sided p-value of ρ from n pairs under independence: Student's t with
// n − 2 degrees of freedom of t = ρ √((n−2)/(1−ρ²)), the usual approximation above 10 pairs.
func SpearmanP(rho float64, n int) float64 {
	if n < 3 || math.IsNaN(rho) {
		return math.NaN()
	}
	if math.Abs(rho) >= 1 {
		return 0
	}
	df := float64(n - 2)
	t := rho * math.Sqrt(df/(1-rho*rho))
	return regIncBeta(df/2, 0.5, df/(df+t*t))
}

// ChiSquare is a χ² test of independence on a contingency table.
type ChiSquare struct {
	Stat  float64 `json:"stat"`
	DF    int     `json:"df"`
	P     float64 `json:"p"`
	Bins  int     `json:"bins"`
	Pairs int     `json:"pairs"`
}

// MinExpected is the smallest expected count per cell ChiSquareIndependence allows: the rule of
// thumb under which the χ² distribution is a fair approximation of the statistic's.
const MinExpected = 5

// ChiSquareIndependence tests whether y is independent of x: both are cut at their quantiles
// into k equal bins (k the most, up to maxBins, that leaves MinExpected pairs expected per cell),
// and the k×k table of counts is compared with the product of its margins. P is the chance of a
// statistic at least as large under independence; NaN when there are too few pairs for 2 bins.
func ChiSquareIndependence(x, y []float64, maxBins int) ChiSquare {
	n := len(x)
	k := min(maxBins, int(math.Sqrt(float64(n)/MinExpected)))
	if len(y) != n || k < 2 {
		return ChiSquare{P: math.NaN(), Pairs: n}
	}
	bx, by := quantileBins(x, k), quantileBins(y, k)
	table := make([][]float64, k)
	for i := range table {
		table[i] = make([]float64, k)
	}
	for i := range n {
		table[bx[i]][by[i]]++
	}
	rows, cols := make([]float64, k), make([]float64, k)
	for i := range k {
		for j := range k {
			rows[i] += table[i][j]
			cols[j] += table[i][j]
		}
	}
	var stat float64
	df := 0
	for i := range k {
		for j := range k {
			e := rows[i] * cols[j] / float64(n)
			if e > 0 {
				stat += (table[i][j] - e) * (table[i][j] - e) / e
			}
		}
	}
	nonEmpty := func(m []float64) int {
		c := 0
		for _, v := range m {
			if v > 0 {
				c++
			}
		}
		return c
	}
	df = (nonEmpty(rows) - 1) * (nonEmpty(cols) - 1)
	if df < 1 {
		return ChiSquare{P: math.NaN(), Bins: k, Pairs: n}
	}
	return ChiSquare{Stat: stat, DF: df, P: ChiSquareSurvival(stat, df), Bins: k, Pairs: n}
}

// quantileBins puts each x in one of k bins of equal size by its rank; tied values share the bin
// of their mean rank.
func quantileBins(xs []float64, k int) []int {
	r := Ranks(xs)
	out := make([]int, len(xs))
	for i, v := range r {
		out[i] = min(k-1, int((v-1)*float64(k)/float64(len(xs))))
	}
	return out
}

// ChiSquareSurvival is P(χ²_df ≥ stat): the upper regularized gamma function Q(df/2, stat/2).
func ChiSquareSurvival(stat float64, df int) float64 {
	if stat <= 0 {
		return 1
	}
	return regGammaQ(float64(df)/2, stat/2)
}

// MannWhitney is a one-sided Mann-Whitney U test that the values of a tend to be smaller than
// those of b (here: the bots' places in line ahead of the honest buyers'), in the normal
// approximation with the tie correction. Z is negative when a's are smaller; P is the chance of a
// Z at most as large when both come from one distribution. NaN when either side is empty.
type MannWhitney struct {
	U float64 `json:"u"`
	Z float64 `json:"z"`
	P float64 `json:"p"`
}

// MannWhitneyLess runs the test of MannWhitney on a and b.
func MannWhitneyLess(a, b []float64) MannWhitney {
	n1, n2 := float64(len(a)), float64(len(b))
	if n1 == 0 || n2 == 0 {
		return MannWhitney{Z: math.NaN(), P: math.NaN()}
	}
	all := append(slices.Clone(a), b...)
	r := Ranks(all)
	var r1 float64
	for i := range a {
		r1 += r[i]
	}
	u := r1 - n1*(n1+1)/2
	n := n1 + n2
	// Tie correction: Σ(t³−t) over the groups of tied values.
	ties := map[float64]float64{}
	for _, v := range all {
		ties[v]++
	}
	var tsum float64
	for _, t := range ties {
		tsum += t*t*t - t
	}
	variance := n1 * n2 / 12 * ((n + 1) - tsum/(n*(n-1)))
	if variance <= 0 {
		return MannWhitney{U: u, Z: 0, P: 1}
	}
	z := (u - n1*n2/2) / math.Sqrt(variance)
	return MannWhitney{U: u, Z: z, P: 0.5 * math.Erfc(-z/math.Sqrt2)}
}

// Lottery is what a fair draw gives a group of one pool: Expected of its members among the first
// Drawn of Pool places, with SD the spread of the hypergeometric distribution (none when the draw
// takes the whole pool or the order is fixed), and Bound the most the judge allows: Expected +
// Z·SD + 1 (one for the integer count).
type Lottery struct {
	Pool     int     `json:"pool"`
	Members  int     `json:"members"`
	Drawn    int     `json:"drawn"`
	Expected float64 `json:"expected"`
	SD       float64 `json:"sd"`
	Bound    float64 `json:"bound"`
}

// FairZ is the number of standard deviations above its fair expectation that a group may get
// before the judge calls the draw unfair: 3, a one-sided false alarm of about 0.13 % per check.
const FairZ = 3

// Draw is the Lottery of members of pool when the first drawn places are drawn at random; fixed
// members are already placed in them for certain (a fixed order before or after the random
// part: FIFO's arrivals, or those after the pre-queue).
func Draw(pool, members, drawn, fixed int) Lottery {
	l := Lottery{Pool: pool, Members: members, Drawn: drawn, Expected: float64(fixed)}
	if pool > 0 && drawn > 0 {
		d := float64(min(drawn, pool))
		q := float64(members) / float64(pool)
		l.Expected += d * q
		if pool > 1 {
			l.SD = math.Sqrt(d * q * (1 - q) * (float64(pool) - d) / float64(pool-1))
		}
	}
	l.Bound = l.Expected + FairZ*l.SD + 1
	return l
}

// ETAErrors are the relative errors of estimates stated in whole units of step, rounded up (an
// ETA of n seconds says "within (n−1, n]"): for each pair with a positive actual wait, its distance
// to the interval its estimate states, ÷ the actual wait; 0 inside it.
func ETAErrors(estimate, actual []time.Duration, step time.Duration) []float64 {
	var out []float64
	for i := range min(len(estimate), len(actual)) {
		a := actual[i]
		if a <= 0 {
			continue
		}
		lo, hi := max(0, estimate[i]-step), estimate[i]
		var d time.Duration
		switch {
		case a < lo:
			d = lo - a
		case a > hi:
			d = a - hi
		}
		out = append(out, float64(d)/float64(a))
	}
	return out
}

// Quantile is the q-quantile of xs (nearest rank on the sorted values), NaN when xs is empty.
func Quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(len(s)-1, i))]
}

// PerSecond counts events by the whole second they fall in (Unix seconds) and returns the
// counts of every second from the first to the last, zeros included.
func PerSecond(secs []int64) []int {
	if len(secs) == 0 {
		return nil
	}
	lo, hi := slices.Min(secs), slices.Max(secs)
	out := make([]int, hi-lo+1)
	for _, s := range secs {
		out[s-lo]++
	}
	return out
}

// regIncBeta is the regularized incomplete beta function I_x(a, b) (Numerical Recipes' continued
// fraction, Lentz's method).
func regIncBeta(a, b, x float64) float64 {
	switch {
	case x <= 0:
		return 0
	case x >= 1:
		return 1
	}
	lg := func(v float64) float64 { l, _ := math.Lgamma(v); return l }
	front := math.Exp(lg(a+b) - lg(a) - lg(b) + a*math.Log(x) + b*math.Log(1-x))
	if x < (a+1)/(a+b+2) {
		return front * betaCF(a, b, x) / a
	}
	return 1 - front*betaCF(b, a, 1-x)/b
}

func betaCF(a, b, x float64) float64 {
	const tiny, eps = 1e-300, 1e-14
	c, d := 1.0, 1-(a+b)*x/(a+1)
	if math.Abs(d) < tiny {
		d = tiny
	}
	d = 1 / d
	h := d
	for m := 1; m <= 300; m++ {
		fm := float64(m)
		aa := fm * (b - fm) * x / ((a + 2*fm - 1) * (a + 2*fm))
		d, c = 1+aa*d, 1+aa/c
		d, c = nonZero(d, tiny), nonZero(c, tiny)
		d = 1 / d
		h *= d * c
		aa = -(a + fm) * (a + b + fm) * x / ((a + 2*fm) * (a + 2*fm + 1))
		d, c = 1+aa*d, 1+aa/c
		d, c = nonZero(d, tiny), nonZero(c, tiny)
		d = 1 / d
		del := d * c
		h *= del
		if math.Abs(del-1) < eps {
			break
		}
	}
	return h
}

func nonZero(v, tiny float64) float64 {
	if math.Abs(v) < tiny {
		return tiny
	}
	return v
}

// regGammaQ is the upper regularized gamma function Q(a, x) = Γ(a, x) / Γ(a): a series below
// a+1, a continued fraction above.
func regGammaQ(a, x float64) float64 {
	lga, _ := math.Lgamma(a)
	if x < a+1 {
		sum, term := 1/a, 1/a
		for n := 1; n < 1000; n++ {
			term *= x / (a + float64(n))
			sum += term
			if math.Abs(term) < math.Abs(sum)*1e-15 {
				break
			}
		}
		return 1 - sum*math.Exp(-x+a*math.Log(x)-lga)
	}
	const tiny = 1e-300
	b := x + 1 - a
	c, d := 1/tiny, 1/b
	h := d
	for i := 1; i < 1000; i++ {
		an := -float64(i) * (float64(i) - a)
		b += 2
		d = nonZero(an*d+b, tiny)
		c = nonZero(b+an/c, tiny)
		d = 1 / d
		del := d * c
		h *= del
		if math.Abs(del-1) < 1e-15 {
			break
		}
	}
	return math.Exp(-x+a*math.Log(x)-lga) * h
}
