package main

import (
	"io"
	"testing"

	"github.com/seckill-go/seckill-go/loadtest/internal/attack"
	"github.com/seckill-go/seckill-go/loadtest/internal/fairness"
	"github.com/seckill-go/seckill-go/loadtest/internal/faults"
	"github.com/seckill-go/seckill-go/loadtest/internal/proof"
	"github.com/seckill-go/seckill-go/loadtest/internal/zoo"
)

func TestModeOf(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want mode
	}{
		{nil, modeRun},
		{[]string{"-strategies", "mysql", "-pay", "0.5"}, modeRun},
		{[]string{"-faults", "all", "-strategies", "mysql"}, modeFaults},
		{[]string{"--faults=kill,term"}, modeFaults},
		{[]string{"-faults", ""}, modeRun},
		{[]string{"-faults="}, modeRun},
		{[]string{"-zoo", "-strategies", "all"}, modeZoo},
		{[]string{"-zoo=true"}, modeZoo},
		{[]string{"-zoo=false"}, modeRun},
		{[]string{"-audit-only", "-product-id", "7"}, modeAudit},
		{[]string{"-waiting-room", "-strategies", "mysql,none"}, modeWaitingRoom},
		{[]string{"-waiting-room=false"}, modeRun},
	} {
		if got := modeOf(tc.args); got != tc.want {
			t.Errorf("modeOf(%q) = %d, want %d", tc.args, got, tc.want)
		}
	}
}

// TestEachModeParsesItsOwnFlags: a mode takes its own flags and the shared ones, and refuses
// another mode's, as the one parser of all modes refused the combinations.
func TestEachModeParsesItsOwnFlags(t *testing.T) {
	env := func(string) string { return "" }
	parsers := map[string]func(args []string) error{
		"load test": func(a []string) error { _, err := proof.Parse(a, env, io.Discard); return err },
		"faults":    func(a []string) error { _, err := faults.Parse(a, env, io.Discard); return err },
		"zoo":       func(a []string) error { _, err := zoo.Parse(a, env, io.Discard); return err },
		"audit":     func(a []string) error { _, err := attack.ParseAudit(a, env, io.Discard); return err },
		"room":      func(a []string) error { _, err := fairness.Parse(a, env, io.Discard); return err },
	}
	for _, tc := range []struct {
		mode string
		args []string
		ok   bool
	}{
		{"load test", []string{"-stock", "10", "-pay", "0.5", "-viewers", "0,5", "-chaos", "kill"}, true},
		{"load test", []string{"-faults", "all"}, false},
		{"load test", []string{"-zoo"}, false},
		{"load test", []string{"-zoo-pause", "9s"}, false},
		{"faults", []string{"-faults", "all", "-step", "10s", "-chaos-replica", "1"}, true},
		{"faults", []string{"-faults", "all", "-pay", "0.5"}, false},
		{"faults", []string{"-faults", "all", "-chaos", "kill"}, false},
		{"faults", []string{"-faults", "all", "-viewers", "5"}, false},
		{"faults", []string{"-faults", "all", "-chaos-replica", "4"}, false},
		{"zoo", []string{"-zoo", "-zoo-faults", "pause", "-step", "5s"}, true},
		{"zoo", []string{"-zoo", "-faults", "all"}, false},
		{"zoo", []string{"-zoo", "-pay", "0.5"}, false},
		{"zoo", []string{"-zoo", "-chaos", "kill"}, false},
		{"zoo", []string{"-zoo", "-zoo-pause", "1s"}, false},
		{"audit", []string{"-audit-only", "-product-id", "7", "-k6-summary", "s.json"}, true},
		{"audit", []string{"-audit-only"}, false},
		{"audit", []string{"-audit-only", "-product-id", "7", "-faults", "all"}, false},
		{"room", []string{"-waiting-room", "-crowd", "200", "-admit-rate", "10", "-variants", "shuffle"}, true},
		{"room", []string{"-waiting-room", "-variants", "lottery"}, false},
		{"room", []string{"-waiting-room", "-crowd", "100", "-stock", "100"}, false},
		{"room", []string{"-waiting-room", "-pay", "0.5"}, false},
		{"room", []string{"-waiting-room", "-pre-queue", "1500ms"}, false},
	} {
		err := parsers[tc.mode](tc.args)
		if (err == nil) != tc.ok {
			t.Errorf("%s %q: error %v, want ok=%v", tc.mode, tc.args, err, tc.ok)
		}
	}
}
