package faults

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/seckill-go/seckill-go/internal/audit"
	"github.com/seckill-go/seckill-go/loadtest/internal/attack"
)

// stepAnswers is a strategy's answers during a fault: at each offset in ms from start, a status
// (503 takes lat503, others 2 ms).
func stepAnswers(start time.Time, lat503 time.Duration, at map[int]int) []attack.Answer {
	var out []attack.Answer
	for _, ms := range slices.Sorted(func(yield func(int) bool) {
		for k := range at {
			if !yield(k) {
				return
			}
		}
	}) {
		a := attack.Answer{Sent: start.Add(time.Duration(ms) * time.Millisecond), Status: at[ms], Latency: 2 * time.Millisecond}
		switch a.Status {
		case 202:
			a.OrderID = "o"
		case 503:
			a.Code, a.Latency = "unavailable", lat503
		}
		out = append(out, a)
	}
	return out
}

// TestStepVerdict plays the judging of one step on made-up answers: a step where the buyers
// saw the fault and got over it passes, and each promise broken fails it with its reason.
func TestStepVerdict(t *testing.T) {
	start := time.Unix(1_800_000_000, 0)
	ms := func(n int) time.Time { return start.Add(time.Duration(n) * time.Millisecond) }
	times := faultTimes{inject: ms(2000), down: ms(2500), restore: ms(7500), up: ms(8000)}
	outage := Fault{Name: "redis", outage: true, failFast: "redis"}
	// Sales until 2 s, 503s while Redis is away, sales again from 8.1 s.
	good := map[int]int{0: 202, 1000: 202, 2600: 503, 4000: 503, 7000: 503, 8100: 202, 9000: 202}
	cases := []struct {
		name    string
		f       Fault
		lat503  time.Duration
		answers map[int]int
		sr      attack.StrategyReport
		want    []string // substrings of the violations, in order; none: PASS
	}{
		{name: "recovered", f: outage, lat503: 3 * time.Millisecond, answers: good},
		{name: "slow 503s", f: outage, lat503: 3 * time.Second, answers: good,
			want: []string{"redis: 503s while its lock service was away are not fast: p99 3000.0 ms"}},
		{name: "no 503 while away", f: outage, answers: map[int]int{0: 202, 2600: 500, 8100: 202},
			want: []string{"redis: no 503 while its lock service was away"}},
		{name: "never recovered", f: outage, lat503: time.Millisecond, answers: map[int]int{0: 202, 3000: 503, 8100: 503, 9000: 503},
			want: []string{"redis: no purchase accepted after the fault was undone"}},
		{name: "load too short", f: outage, lat503: time.Millisecond, answers: map[int]int{0: 202, 3000: 503},
			want: []string{"redis: the load ended before the fault was undone"}},
		{name: "audit failed", f: outage, lat503: time.Millisecond, answers: good,
			sr:   attack.StrategyReport{Verdict: "FAIL", Violations: []string{"OVERSOLD by 1 units"}},
			want: []string{"redis: OVERSOLD by 1 units"}},
		{name: "sold out in the fault", f: outage, lat503: time.Millisecond, answers: map[int]int{0: 202, 2600: 503, 3000: 202, 8100: 409},
			sr: attack.StrategyReport{Facts: audit.Facts{InitialStock: 2, Stock: 0}}},
		{name: "units left, no sale after", f: outage, lat503: time.Millisecond, answers: map[int]int{0: 202, 2600: 503, 3000: 202, 8100: 503},
			sr:   attack.StrategyReport{Facts: audit.Facts{InitialStock: 3, Stock: 1}},
			want: []string{"redis: no purchase accepted after the fault was undone"}},
		{name: "unnoticed", f: Fault{Name: "term", unnoticed: true}, answers: map[int]int{0: 202, 3000: 202, 9000: 202}},
		{name: "term noticed", f: Fault{Name: "term", unnoticed: true}, answers: map[int]int{0: 202, 3000: 0, 9000: 202},
			want: []string{"the buyers noticed: 0 × 503, 1 lost answers, 0 other 5xx"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			answers := stepAnswers(start, tc.lat503, tc.answers)
			sr := tc.sr
			sr.Strategy = "redis"
			if sr.Verdict == "" {
				sr.Verdict = "PASS"
			}
			sr.Latency = map[string]attack.Latency{}
			step := &StepReport{Fault: tc.f.Name}
			ss := step.judgeStrategy(&sr, answers, times)
			ss.CaughtUpSeconds = 0.1
			step.summarize(answers, times, start, tc.f)
			if len(step.Violations) != len(tc.want) {
				t.Fatalf("violations %q, want %d like %q", step.Violations, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(step.Violations[i], w) {
					t.Errorf("violation %d = %q, want it to say %q", i, step.Violations[i], w)
				}
			}
			if want := map[bool]string{true: "PASS", false: "FAIL"}[len(tc.want) == 0]; step.Verdict != want {
				t.Errorf("verdict %s, want %s", step.Verdict, want)
			}
		})
	}
}

// TestStepRecovery checks the figures of a step: recovery from the fault's undoing to the first
// purchase accepted since, 503s counted, the 503s while away apart from those of the stop.
func TestStepRecovery(t *testing.T) {
	start := time.Unix(1_800_000_000, 0)
	ms := func(n int) time.Time { return start.Add(time.Duration(n) * time.Millisecond) }
	times := faultTimes{inject: ms(2000), down: ms(2500), restore: ms(7500), up: ms(8000)}
	answers := stepAnswers(start, 4*time.Millisecond, map[int]int{0: 202, 2100: 503, 3000: 503, 8050: 503, 8300: 202, 8400: 202, 8500: 0})
	answers[1].Latency = 400 * time.Millisecond // sent while Redis was stopping: not held to the promise
	sr := attack.StrategyReport{Strategy: "redis", Verdict: "PASS", Latency: map[string]attack.Latency{}}
	step := &StepReport{}
	ss := step.judgeStrategy(&sr, answers, times)
	got := []any{ss.Unavailable, ss.TransportErrors, ss.Latency503Away.Count, ss.Latency503Away.Max, ss.RecoverySeconds}
	want := []any{3, 1, 1, 4.0, 0.3}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 })); diff != "" {
		t.Errorf("503s, lost answers, 503s while away, their max ms, recovery s (-want +got):\n%s", diff)
	}
}

// TestControlInStep: the unsafe control passes a step by overselling, and fails it when it
// did not (the step could not have caught an oversell).
func TestControlInStep(t *testing.T) {
	start := time.Unix(1_800_000_000, 0)
	answers := stepAnswers(start, 0, map[int]int{0: 202})
	for _, oversold := range []int{3, 0} {
		_, violations := attack.Verdict(attack.UnsafeStrategy, oversold, nil)
		v, violations := attack.Verdict(attack.UnsafeStrategy, oversold, violations) // asked again, as account does
		sr := attack.StrategyReport{Strategy: attack.UnsafeStrategy, Verdict: v, Violations: violations, Latency: map[string]attack.Latency{}}
		step := &StepReport{}
		step.judgeStrategy(&sr, answers, faultTimes{}).CaughtUpSeconds = 0
		step.summarize(answers, faultTimes{}, start, Fault{Name: "kafka"})
		wantPass := oversold > 0
		if (step.Verdict == "PASS") != wantPass || (!wantPass && len(step.Violations) != 1) {
			t.Errorf("control oversold %d: step %s %q", oversold, step.Verdict, step.Violations)
		}
	}
}

func TestBurstPacer(t *testing.T) {
	p := attack.BurstPacer{Every: 500 * time.Millisecond, PerBurst: 3}
	cases := []struct {
		elapsed time.Duration
		hits    uint64
		want    time.Duration
	}{
		{0, 0, 0}, {0, 2, 0}, {0, 3, 500 * time.Millisecond}, {100 * time.Millisecond, 3, 400 * time.Millisecond},
		{500 * time.Millisecond, 3, 0}, {600 * time.Millisecond, 6, 400 * time.Millisecond}, {2 * time.Second, 6, 0},
	}
	for _, tc := range cases {
		if got, stop := p.Pace(tc.elapsed, tc.hits); got != tc.want || stop {
			t.Errorf("Pace(%s, %d) = %s, %v; want %s", tc.elapsed, tc.hits, got, stop, tc.want)
		}
	}
	if got := p.Rate(0); got != 6 {
		t.Errorf("Rate = %v, want 6", got)
	}
}

func TestParseFaults(t *testing.T) {
	got, err := parseFaults("kill, redis,,term")
	if err != nil || !slices.Equal(got, []string{"kill", "redis", "term"}) {
		t.Errorf("parseFaults = %q, %v", got, err)
	}
	if got, _ := parseFaults("all"); !slices.Equal(got, faultNames) {
		t.Errorf("parseFaults(all) = %q", got)
	}
	if _, err := parseFaults("redis,reboot"); err == nil || !strings.Contains(err.Error(), `"reboot"`) {
		t.Errorf("parseFaults(reboot): %v, want an error naming it", err)
	}
}

// TestChaosMarkdownLoss: the report says what a lossy fault destroyed and within what it could,
// even when that is nothing, and names a strategy that sold out during a fault.
func TestChaosMarkdownLoss(t *testing.T) {
	r := &ChaosReport{Passed: true, Steps: []StepReport{
		{Fault: "redis-flush", Verdict: "PASS", PerStrategy: []StepStrategy{
			{Strategy: "redis-lua", Verdict: "PASS", Lossy: true, Lost: 3, InReach: 5, RecoverySeconds: -1},
			{Strategy: "mysql", Verdict: "PASS", RecoverySeconds: -1},
		}},
		{Fault: "redis-flush", Verdict: "PASS", PerStrategy: []StepStrategy{{Strategy: "redis-lua", Verdict: "PASS", Lossy: true, RecoverySeconds: -1}}},
		{Fault: "mysql", Verdict: "PASS", PerStrategy: []StepStrategy{{Strategy: "redis-lua", Verdict: "PASS", SoldOutInFault: true, RecoverySeconds: -1}}},
	}}
	md := Markdown(r)
	for _, want := range []string{
		"| redis-flush | redis-lua |", "| PASS, 3 lost of 5 in reach |", "| PASS, 0 lost of 0 in reach |",
		"redis-lua: 3 of the 5 accepted purchases the fault could destroy were lost",
		"| sold out in the fault |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
	if strings.Count(md, " in reach |") != 2 {
		t.Errorf("want 'lost of' on the two lossy rows only:\n%s", md)
	}
}
