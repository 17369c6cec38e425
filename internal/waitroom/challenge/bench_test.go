package challenge_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/waitroom/challenge"
)

// The costs of the challenge, per operation, as docs/api.md reports them (make no assumption
// about a machine: compare them with each other and with the join's own cost). Besides ns/op
// (wall time) each reports cpu-ns/op, the process's CPU time per operation, which moves much less
// when other work shares the machine's two cores (httpapi's benchmarks do the same).

// cpuTime is the process's CPU time so far.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuSince reports the CPU time since start per timed operation: the time spent off the clock
// (stopped is its CPU time) is left out.
func cpuSince(b *testing.B, start, stopped time.Duration) {
	b.ReportMetric(float64(cpuTime(b)-start-stopped)/float64(b.N), "cpu-ns/op")
}

// BenchmarkIssue: one challenge issued (random salt and number, one SHA-256, one HMAC).
func BenchmarkIssue(b *testing.B) {
	a := newAltcha(b, newClock(time.Now()), challenge.AltchaOptions{})
	ctx := context.Background()
	b.ReportAllocs()
	cpu := cpuTime(b)
	for b.Loop() {
		if _, err := a.Issue(ctx); err != nil {
			b.Fatal(err)
		}
	}
	cpuSince(b, cpu, 0)
}

// BenchmarkVerify: one genuine solution verified and spent in memory (the replay cache's Redis
// round trip is redisspent's benchmark). The solutions are made before the timer runs.
func BenchmarkVerify(b *testing.B) {
	a := newAltcha(b, newClock(time.Now()), challenge.AltchaOptions{MaxNumber: 1000})
	ctx := context.Background()
	const pool = 4096
	sols := make([]string, pool)
	for i := range sols {
		sols[i] = solve(b, issue(b, a))
	}
	b.ReportAllocs()
	i := 0
	var stopped time.Duration
	cpu := cpuTime(b)
	for b.Loop() {
		if i == pool { // spent: new ones, off the clock
			b.StopTimer()
			from := cpuTime(b)
			for j := range sols {
				sols[j] = solve(b, issue(b, a))
			}
			i = 0
			stopped += cpuTime(b) - from
			b.StartTimer()
		}
		if err := a.Verify(ctx, sols[i], ""); err != nil {
			b.Fatal(err)
		}
		i++
	}
	cpuSince(b, cpu, stopped)
}

// BenchmarkVerifyRefused: a forged solution (a wrong number) refused: what a bot that does not
// do the work costs the server.
func BenchmarkVerifyRefused(b *testing.B) {
	a := newAltcha(b, newClock(time.Now()), challenge.AltchaOptions{})
	c := issue(b, a)
	forged := challenge.Solution(c, c.MaxNumber+1)
	ctx := context.Background()
	b.ReportAllocs()
	cpu := cpuTime(b)
	for b.Loop() {
		if err := a.Verify(ctx, forged, ""); err == nil {
			b.Fatal("a forged solution passed")
		}
	}
	cpuSince(b, cpu, 0)
}

// BenchmarkSolve: one challenge of the default difficulty solved in Go, as a visitor (or a bot)
// does: MaxNumber/2 hashes on average, so the per-op figure varies with the secret numbers drawn;
// hashes/op is reported beside it.
func BenchmarkSolve(b *testing.B) {
	a := newAltcha(b, newClock(time.Now()), challenge.AltchaOptions{})
	ctx := context.Background()
	var hashes int64
	cpu := cpuTime(b)
	for b.Loop() {
		b.StopTimer()
		c := issue(b, a)
		b.StartTimer()
		sol, err := challenge.Solve(ctx, c)
		if err != nil {
			b.Fatal(err)
		}
		hashes += int64(decode(b, sol)["number"].(float64)) + 1
	}
	cpuSince(b, cpu, 0) // issuing is ~1/1000 of a solve: left in
	b.ReportMetric(float64(hashes)/float64(b.N), "hashes/op")
}
