package faults

import (
	"errors"
	"testing"
)

func TestJudgeRunningAudit(t *testing.T) {
	sales := map[int64]string{1: "mysql", 2: "redis-lua", 3: "none", 4: "none"}
	cases := []struct {
		name             string
		f                auditFigures
		missing, drifted int
		controlOversold  int
		wantErr          bool
	}{
		{"sound, the control caught", auditFigures{violations: map[int64]float64{1: 0, 2: 0, 3: 3, 4: 0}, oversold: map[int64]float64{3: 2}}, 0, 0, 1, false},
		{"a safe sale drifted", auditFigures{violations: map[int64]float64{1: 1, 2: 0, 3: 3, 4: 2}, oversold: map[int64]float64{3: 2, 4: 1}}, 0, 1, 2, false},
		{"a sale never checked", auditFigures{violations: map[int64]float64{1: 0, 3: 3, 4: 0}, oversold: map[int64]float64{3: 2}}, 1, 0, 1, false},
		{"no scrape", auditFigures{violations: map[int64]float64{}, oversold: map[int64]float64{}, err: errors.New("refused")}, 4, 0, 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ra := judgeRunningAudit(c.f, sales)
			if len(ra.Missing) != c.missing || len(ra.Drifted) != c.drifted || ra.ControlOversold != c.controlOversold ||
				ra.ControlSales != 2 || (ra.Err != "") != c.wantErr {
				t.Fatalf("got %+v", ra)
			}
		})
	}
}
