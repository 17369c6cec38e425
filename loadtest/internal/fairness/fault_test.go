package fairness

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestJudgeFault(t *testing.T) {
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	// waiting: in line at the fault (joined long before), its place never changed.
	waiting := func(user string, tickets ...int64) *Visitor {
		return &Visitor{User: user, Tickets: tickets, FirstTicketAt: at.Add(-10 * time.Second)}
	}
	// justJoined: in line, its join answered 200 ms before the fault.
	justJoined := &Visitor{User: "late", Tickets: []int64{50, 71}, FirstTicketAt: at.Add(-200 * time.Millisecond), Rejoins: 1}
	// admitted before the fault, bought after it with that pass.
	admittedBefore := func(user string, status int, code string) *Visitor {
		return &Visitor{User: user, Tickets: []int64{1}, FirstTicketAt: at.Add(-20 * time.Second),
			AdmittedSecond: at.Add(-5 * time.Second).Unix(), AdmittedSeen: at.Add(-5 * time.Second),
			Purchases: []Purchase{
				{Foul: "no_pass", Status: http.StatusForbidden, At: at.Add(time.Second)},  // a foul: not the pass's fate
				{Status: 0, At: at.Add(time.Second)},                                      // no answer: says nothing
				{Status: status, Code: code, At: at.Add(2 * time.Second)},                 // the answer that counts
				{Status: http.StatusForbidden, Code: "late", At: at.Add(3 * time.Second)}, // after it: not read
			}}
	}
	cases := []struct {
		name     string
		kind     string
		visitors []*Visitor
		pass     bool
		inLine   int
		kept     int
		moved    int
		mayMove  int
		across   int
		refused  int
	}{
		{"kill: every place kept, the pass still buys", FaultKill,
			[]*Visitor{waiting("a", 10), waiting("b", 11), admittedBefore("c", http.StatusAccepted, "")}, true, 2, 2, 0, 0, 1, 0},
		{"kill: a place told anew fails", FaultKill,
			[]*Visitor{waiting("a", 10), waiting("b", 11, 90)}, false, 2, 1, 1, 0, 0, 0},
		{"kill: a join just before it may not move either", FaultKill,
			[]*Visitor{waiting("a", 10), justJoined}, false, 2, 1, 1, 0, 0, 0},
		{"failover: the last second's join may move", FaultRedisFailover,
			[]*Visitor{waiting("a", 10), justJoined}, true, 2, 1, 0, 1, 0, 0},
		{"failover: an older place may not", FaultRedisFailover,
			[]*Visitor{waiting("a", 10, 80), justJoined}, false, 2, 0, 1, 1, 0, 0},
		{"a pass refused after the fault fails", FaultRedisFailover,
			[]*Visitor{waiting("a", 10), admittedBefore("c", http.StatusForbidden, "admission_pass_invalid")}, false, 1, 1, 0, 0, 0, 1},
		{"sold out after the fault: the pass was taken", FaultKill,
			[]*Visitor{waiting("a", 10), admittedBefore("c", http.StatusConflict, "sold_out")}, true, 1, 1, 0, 0, 1, 0},
		{"nobody in line: it tested nothing", FaultKill,
			[]*Visitor{admittedBefore("c", http.StatusAccepted, "")}, false, 0, 0, 0, 0, 1, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fj := judgeFault(c.visitors, FaultJudgement{Kind: c.kind, At: at})
			if fj.Passed != c.pass || fj.InLine != c.inLine || fj.Kept != c.kept || len(fj.Moved) != c.moved ||
				fj.MayMove != c.mayMove || fj.PassesAcross != c.across || len(fj.PassesRefused) != c.refused {
				t.Fatalf("got passed %v, in line %d, kept %d, moved %v, may move %d, passes across %d, refused %v; want %v, %d, %d, %d, %d, %d, %d",
					fj.Passed, fj.InLine, fj.Kept, fj.Moved, fj.MayMove, fj.PassesAcross, fj.PassesRefused,
					c.pass, c.inLine, c.kept, c.moved, c.mayMove, c.across, c.refused)
			}
		})
	}
	t.Run("an error fails it", func(t *testing.T) {
		fj := judgeFault([]*Visitor{waiting("a", 10)}, FaultJudgement{Kind: FaultKill, At: at, Err: "replica.sh kill 2: exit status 1"})
		if fj.Passed {
			t.Fatal("a fault that failed to strike passed")
		}
	})
	t.Run("the report says what moved", func(t *testing.T) {
		j := JudgeRoom([]*Visitor{waiting("a", 10, 80)}, VariantFIFO, 20, 100*time.Millisecond, 3, at)
		fj := judgeFault([]*Visitor{waiting("a", 10, 80)}, FaultJudgement{Kind: FaultKill, At: at, Detail: "replica 2 SIGKILLed"})
		j.Fault = &fj
		md := Markdown(&Report{Sales: []Sale{{Strategy: "mysql", Variant: VariantFIFO, Judgement: j}}, Settings: Settings{Fault: FaultKill, FaultAt: "2s"}})
		for _, want := range []string{"fault kill** (FAIL)", "a: place [10 80]", "ETA** (not judged: a fault)"} {
			if !strings.Contains(md, want) {
				t.Errorf("the report lacks %q:\n%s", want, md)
			}
		}
		if j.Passed() {
			t.Error("a judgement with a failed fault passed")
		}
	})
}

func TestValidFault(t *testing.T) {
	for _, k := range []string{"", FaultKill, FaultRedisFailover} {
		if err := validFault(k); err != nil {
			t.Errorf("%q: %v", k, err)
		}
	}
	if validFault("redis") == nil {
		t.Error("an unknown fault was taken")
	}
}
