package proof

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/seckill-go/seckill-go/internal/audit"
	"github.com/seckill-go/seckill-go/loadtest/internal/attack"
)

func TestPaymentMarkdown(t *testing.T) {
	if got := paymentMarkdown([]attack.StrategyReport{{Strategy: "mysql"}}); got != "" {
		t.Errorf("without a payment phase: %q, want nothing", got)
	}
	ss := []attack.StrategyReport{
		{Strategy: "mysql", Verdict: "PASS", Facts: audit.Facts{Stock: 0, PaidUnits: 10},
			Payment: &attack.PaymentReport{WindowSeconds: 5.04, First: attack.PayTally{Orders: 10, Paid: 4, Declined: 1}, Expired: 6, Returned: 6, WaitSeconds: 5.5,
				Second: attack.WaveReport{Units: 6, Buyers: 120, Accepted: 6, Pay: attack.PayTally{Paid: 6, Declined: 2}}}},
		{Strategy: "redis-lua", Verdict: "PASS", Payment: &attack.PaymentReport{Skipped: "-pay-skip"}},
	}
	got := paymentMarkdown(ss)
	for _, want := range []string{
		"| mysql | **PASS** | 5.0 | 10 | 4 | 3 | 0 | 6 | 6 | 5.5 | 6 | 120 | 6 | 6 | 0 | 10 | 0 |\n",
		"| redis-lua | **PASS** | no payment phase (-pay-skip) |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the table lacks %q:\n%s", want, got)
		}
	}
}

func TestParsePayOptions(t *testing.T) {
	parse := func(args ...string) (*Options, error) {
		return Parse(args, func(string) string { return "" }, io.Discard)
	}
	o, err := parse("-pay", "0.5")
	if err != nil {
		t.Fatal(err)
	}
	if o.pay.Share != 0.5 || len(o.pay.Skip) != 0 || o.pay.MaxWait != 3*time.Minute || o.pay.SecondWave != 0 {
		t.Errorf("-pay 0.5: pay %g, skip %q, max wait %s, second wave %d", o.pay.Share, o.pay.Skip, o.pay.MaxWait, o.pay.SecondWave)
	}
	if o, err := parse("-pay", "1", "-pay-skip", "redis-lua, none"); err != nil || !cmp.Equal(o.pay.Skip, []string{"redis-lua", "none"}) {
		t.Errorf("-pay-skip 'redis-lua, none': %v, %q", err, o.pay.Skip)
	}
	for _, args := range [][]string{{"-pay", "1.5"}, {"-pay", "-0.1"}, {"-pay", "NaN"}, {"-second-wave", "-1"}, {"-pay", "0.5", "-faults", "all"}} {
		if _, err := parse(args...); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}
