package waitroom

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/sale"
)

func valid() Settings {
	return Settings{Mode: WaitingRoom, AdmitRate: 50, MaxActive: 500, Session: 5 * time.Minute,
		OpensAt: time.Date(2026, 11, 11, 0, 0, 0, 0, time.UTC), Shuffle: true, AbandonAfter: 30 * time.Second}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Settings)
		want   string // a piece of the error, or "" for none
	}{
		{"valid", func(*Settings) {}, ""},
		{"open needs nothing else", func(s *Settings) { *s = Settings{Mode: Open} }, ""},
		{"unknown mode", func(s *Settings) { s.Mode = "lottery" }, "unknown admission mode"},
		{"no mode", func(s *Settings) { s.Mode = "" }, "unknown admission mode"},
		{"zero rate", func(s *Settings) { s.AdmitRate = 0 }, "admit rate"},
		{"negative rate", func(s *Settings) { s.AdmitRate = -1 }, "admit rate"},
		{"NaN rate", func(s *Settings) { s.AdmitRate = math.NaN() }, "admit rate"},
		{"infinite rate", func(s *Settings) { s.AdmitRate = math.Inf(1) }, "admit rate"},
		{"a rate below one a second", func(s *Settings) { s.AdmitRate = 0.5 }, ""},
		{"zero max active", func(s *Settings) { s.MaxActive = 0 }, "max active"},
		{"zero session", func(s *Settings) { s.Session = 0 }, "session"},
		{"sub-second session", func(s *Settings) { s.Session = 500 * time.Millisecond }, "session"},
		{"session over an hour", func(s *Settings) { s.Session = 2 * time.Hour }, "session"},
		{"no abandon timeout", func(s *Settings) { s.AbandonAfter = 0 }, "abandon"},
		{"no opening", func(s *Settings) { s.OpensAt = time.Time{} }, "opening"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := valid()
			tc.change(&s)
			err := s.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidSettings) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want ErrInvalidSettings about %q", err, tc.want)
			}
		})
	}
	// Every problem at once, so that a config is fixed in one round.
	err := Settings{Mode: WaitingRoom}.Validate()
	for _, want := range []string{"admit rate", "max active", "session", "abandon", "opening"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate of empty settings = %v, does not name %q", err, want)
		}
	}
}

func TestParseMode(t *testing.T) {
	for in, want := range map[string]Mode{"": Open, "open": Open, " Waiting_Room ": WaitingRoom} {
		if got, err := ParseMode(in); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseMode("queue"); !errors.Is(err, ErrInvalidSettings) {
		t.Errorf("ParseMode(queue) = %v, want ErrInvalidSettings", err)
	}
}

func TestThroughput(t *testing.T) {
	s := valid() // 50/s, 500 sessions of 5 min: the sessions allow 1.67/s
	if got := s.Throughput(); math.Abs(got-500.0/300) > 1e-9 {
		t.Errorf("Throughput = %v, want 500/300", got)
	}
	s.Session = 5 * time.Second // 100/s through sessions: the rate binds
	if got := s.Throughput(); got != 50 {
		t.Errorf("Throughput = %v, want 50", got)
	}
}

func TestETA(t *testing.T) {
	tests := []struct {
		name           string
		ticket, served int64
		rate           float64
		want           time.Duration
		ok             bool
	}{
		{"next in line", 11, 10, 10, 100 * time.Millisecond, true},
		{"a hundred ahead at 20 a second", 110, 10, 20, 5 * time.Second, true},
		{"slow rate", 4, 0, 0.5, 8 * time.Second, true},
		{"served already", 5, 10, 10, 0, true},
		{"its own turn", 10, 10, 10, 0, true},
		{"beyond a day", 1_000_000_000, 0, 1, MaxETA, true},
		{"no overflow", math.MaxInt64, math.MinInt64 + 1, 1e-300, MaxETA, true},
		{"zero rate", 11, 10, 0, 0, false},
		{"negative rate", 11, 10, -3, 0, false},
		{"NaN rate", 11, 10, math.NaN(), 0, false},
		{"infinite rate", 11, 10, math.Inf(1), 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ETA(tc.ticket, tc.served, tc.rate)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("ETA(%d, %d, %v) = %v, %v; want %v, %v", tc.ticket, tc.served, tc.rate, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestStatusWait(t *testing.T) {
	st := valid()
	st.Session = 5 * time.Second // the rate binds: 50/s
	now := st.OpensAt.Add(time.Minute)
	tests := []struct {
		name  string
		s     Status
		ahead int64
		want  time.Duration
		ok    bool
	}{
		{"waiting", Status{State: Waiting, Ticket: 160, Served: 60, OpensAt: st.OpensAt, Now: now}, 99, 2 * time.Second, true},
		{"pre-queue in order: the time to the opening, then the line",
			Status{State: PreQueue, Ticket: 100, OpensAt: st.OpensAt, Now: st.OpensAt.Add(-time.Minute)}, 99, time.Minute + 2*time.Second, true},
		{"pre-queue to be shuffled: no place yet",
			Status{State: PreQueue, OpensAt: st.OpensAt, Now: st.OpensAt.Add(-time.Minute)}, 0, 0, false},
		{"sold out: nothing to wait for", Status{State: SoldOut, Ticket: 70, Served: 60, Now: now}, 9, 0, false},
		{"admitted", Status{State: Admitted, Ticket: 7, Served: 60, Now: now}, 0, 0, false},
		{"abandoned", Status{State: Abandoned, Ticket: 7, Served: 60, Now: now}, 0, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.s.Ahead(); got != tc.ahead {
				t.Errorf("Ahead = %d, want %d", got, tc.ahead)
			}
			got, ok := tc.s.Wait(st)
			if got != tc.want || ok != tc.ok {
				t.Errorf("Wait = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestValidateSaleID(t *testing.T) {
	for _, id := range []string{"42", "42:e3", "black-friday_2026.tv", strings.Repeat("s", MaxSaleIDLen)} {
		if err := ValidateSaleID(id); err != nil {
			t.Errorf("ValidateSaleID(%q) = %v", id, err)
		}
	}
	for _, id := range []string{"", "a{b}", "a b", "é", strings.Repeat("s", MaxSaleIDLen+1)} {
		if err := ValidateSaleID(id); !errors.Is(err, sale.ErrInvalid) {
			t.Errorf("ValidateSaleID(%q) = %v, want sale.ErrInvalid", id, err)
		}
	}
}

func TestStateNames(t *testing.T) {
	seen := map[string]bool{}
	for s := NotJoined; s <= SessionOver; s++ {
		name := s.String()
		if name == "" || strings.HasPrefix(name, "State(") || seen[name] {
			t.Errorf("state %d: name %q", int(s), name)
		}
		seen[name] = true
	}
	if got := State(0).String(); got != "State(0)" {
		t.Errorf("State(0) = %q", got)
	}
}

// TestSettingsOfAValidRule: every admission rule sale accepts makes Settings that Validate
// accepts (the two check the same limits), admitting from the sale's start; one sale refuses for
// a number is refused here too.
func TestSettingsOfAValidRule(t *testing.T) {
	start := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	base := sale.AdmissionRule{Mode: sale.AdmissionWaitingRoom, AdmitRate: 50, MaxActive: 200, Session: 2 * time.Minute,
		QueueOpensAt: start.Add(-time.Minute), Shuffle: true, AbandonAfter: 20 * time.Second}
	edges := sale.AdmissionRule{Mode: sale.AdmissionWaitingRoom, AdmitRate: MaxAdmitRate, MaxActive: 1, Session: MinSession,
		AbandonAfter: MinAbandon}
	for _, rule := range []sale.AdmissionRule{base, edges, {Mode: sale.AdmissionWaitingRoom, AdmitRate: 0.01, MaxActive: 1,
		Session: MaxSession, AbandonAfter: sale.MaxAbandon}} {
		p := sale.Product{SaleStartsAt: start, Admission: rule}
		if err := rule.Validate(start); err != nil {
			t.Fatalf("%+v: %v", rule, err)
		}
		s := SettingsOf(p)
		if err := s.Validate(); err != nil {
			t.Errorf("SettingsOf(%+v).Validate() = %v", rule, err)
		}
		if !s.OpensAt.Equal(start) || s.Mode != WaitingRoom {
			t.Errorf("SettingsOf(%+v) = %+v, want a waiting room opening at %v", rule, s, start)
		}
	}
	if s := SettingsOf(sale.Product{SaleStartsAt: start}); s.Mode != Open || s.Validate() != nil {
		t.Errorf("an open product: %+v, %v", s, s.Validate())
	}
	for _, bad := range []func(*sale.AdmissionRule){
		func(a *sale.AdmissionRule) { a.AdmitRate = 0 }, func(a *sale.AdmissionRule) { a.AdmitRate = MaxAdmitRate + 1 },
		func(a *sale.AdmissionRule) { a.MaxActive = 0 }, func(a *sale.AdmissionRule) { a.Session = MinSession - 1 },
		func(a *sale.AdmissionRule) { a.Session = MaxSession + 1 }, func(a *sale.AdmissionRule) { a.AbandonAfter = MinAbandon - 1 },
	} {
		rule := base
		bad(&rule)
		if rule.Validate(start) == nil || SettingsOf(sale.Product{SaleStartsAt: start, Admission: rule}).Validate() == nil {
			t.Errorf("%+v: sale's validation and waitroom's disagree, or accept it", rule)
		}
	}
}
