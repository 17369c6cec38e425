package main

import (
	"strings"
	"testing"

	"github.com/seckill-go/seckill-go/loadtest/internal/attack"
)

func TestBuyersPoint(t *testing.T) {
	sr := attack.StrategyReport{Strategy: "mysql", Requests: 1000, Accepted: 10, SellOutSeconds: 0.5, AcceptedPerSec: 20,
		RequestsPerSec: 900, Seconds: 1.1, Status: map[int]int{202: 10, 409: 985, 502: 2, 503: 3},
		Latency: map[string]attack.Latency{"all": {P50: 3, P99: 40}, "accepted": {P99: 30}}, Verdict: "PASS"}
	p := buyersPointOf(sr, 10, 1000)
	if p.Status5xx != 5 || p.P99MS != 40 || p.AcceptedP99MS != 30 || p.SellOutS != 0.5 || p.Buyers != 1000 || p.Stock != 10 {
		t.Fatalf("point %+v", p)
	}
}

func TestBuyersReport(t *testing.T) {
	r := &buyersReport{Target: "http://127.0.0.1:8080", Stock: 10_000, Workers: 256, Counts: []int{10_000, 1_000_000}, Points: []buyersPoint{
		{Strategy: "mysql", Buyers: 10_000, Requests: 10_000, SellOutS: 2.5, AcceptedPerSec: 4000, RequestsPerSec: 4000, P50MS: 50, P99MS: 120, AcceptedP99MS: 120, GeneratorCPUS: 1, Verdict: "PASS"},
		{Strategy: "mysql", Buyers: 1_000_000, Requests: 1_000_000, SellOutS: 3, AcceptedPerSec: 3333, RequestsPerSec: 9000, P50MS: 20, P99MS: 150, AcceptedP99MS: 140, GeneratorCPUS: 50, Verdict: "PASS"},
	}}
	if !r.passed() {
		t.Fatal("every point PASSed, passed says no")
	}
	var b strings.Builder
	r.markdown(&b)
	if want := "| mysql | 1M | PASS | 3.00 s | 3333 | 9000 | 20.0 · 150.0 | 140.0 | 0 | 5.0 |\n"; !strings.Contains(b.String(), want) {
		t.Errorf("the table lacks\n%s\nin\n%s", want, b.String())
	}
	var h strings.Builder
	r.html(&h)
	if strings.Count(h.String(), "<svg") != 3 || !strings.Contains(h.String(), ">mysql</text>") {
		t.Errorf("charts: %s", h.String())
	}
	r.Points[1].Verdict, r.Points[1].Violations = "FAIL", []string{"oversold by 1"}
	if r.passed() {
		t.Fatal("a FAIL, passed says yes")
	}
	b.Reset()
	r.markdown(&b)
	if !strings.Contains(b.String(), "FAIL: oversold by 1") {
		t.Errorf("the FAIL's violations are not in the table:\n%s", b.String())
	}
}

func TestStockReport(t *testing.T) {
	r := &buyersReport{Target: "http://127.0.0.1:8080", Workers: 256, Crowd: 20_000, Sizes: []int{1000, 10_000_000}, Points: []buyersPoint{
		{Strategy: "redis-lua", Stock: 1000, Buyers: 20_000, Accepted: 1000, SellOutS: 0.4, AcceptedPerSec: 2500, RequestsPerSec: 9000, P50MS: 20, P99MS: 90, AcceptedP99MS: 80, Verdict: "PASS"},
		{Strategy: "redis-lua", Stock: 10_000_000, Buyers: 20_000, Accepted: 20_000, SellOutS: 4, AcceptedPerSec: 5000, RequestsPerSec: 5000, P50MS: 40, P99MS: 100, AcceptedP99MS: 100, Verdict: "PASS"},
	}}
	if p, ok := r.point("redis-lua", 10_000_000); !ok || p.Accepted != 20_000 {
		t.Fatalf("the point at 10M units: %+v, %v", p, ok)
	}
	var b strings.Builder
	r.stockMarkdown(&b)
	for _, want := range []string{
		"| redis-lua | 1000 | PASS | 1000 | 0.40 s | 2500 | 9000 | 20.0 · 90.0 | 80.0 | 0 |\n",
		"| redis-lua | 10M | PASS | 20000 | — (not sold out) | 5000 | 5000 | 40.0 · 100.0 | 100.0 | 0 |\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the table lacks\n%s\nin\n%s", want, b.String())
		}
	}
	var h strings.Builder
	r.stockHTML(&h)
	if strings.Count(h.String(), "<svg") != 3 || !strings.Contains(h.String(), "10M units") {
		t.Errorf("charts: %s", h.String())
	}
}

func TestSalesReport(t *testing.T) {
	r := &salesReport{Strategy: "mysql", UnitsPerSale: 10, Workers: 256, IdleS: 10, Replicas: 3, Base: idleUse{RSSMB: 136, CPUMSPerS: 39, MachineMSPerS: 120},
		Points: []salesPoint{{Open: 1000, CreateMS: 1.8, Idle: idleUse{RSSMB: 205, CPUMSPerS: 208, MachineMSPerS: 420}, PerSaleKB: 71, PerSaleCPUUS: 169, PerSaleMachUS: 300,
			Buyers: 20_000, AcceptedPerS: 1190, P99MS: 869, AuditSeconds: 2.3, Verdict: "PASS"}}}
	if !r.passed() {
		t.Fatal("every point PASSed, passed says no")
	}
	var b strings.Builder
	r.markdown(&b)
	if want := "| 1000 | PASS | 1.8 | 205 · 71 | 208.0 · 169 | 420.0 · 300 | 20k | 1190 | 869 | 0 | 2.3 |\n"; !strings.Contains(b.String(), want) {
		t.Errorf("the table lacks\n%s\nin\n%s", want, b.String())
	}
	r.Points[0].Verdict = "FAIL"
	if r.passed() {
		t.Error("a FAIL, passed says yes")
	}
}

func TestExpiriesReport(t *testing.T) {
	r := &expiriesReport{ProbeRate: 50, Replicas: 3, Points: []expiriesPoint{
		{Orders: 1000, FillS: 0.05, ExpiredS: 0.3, ReturnedS: 0.31, PerS: 3223, CPUMSPer1k: 100,
			Base: probeFigures{Sent: 150, P50MS: 3.3, P99MS: 16.8}, Drain: probeFigures{Sent: 15, P50MS: 3.6, P99MS: 6.5}, ResetS: 0.04, Verdict: "PASS"},
		{Orders: 1_000_000, FillS: 40, ExpiredS: 150, ReturnedS: 160, PerS: 6250, CPUMSPer1k: 70,
			Base: probeFigures{P50MS: 3, P99MS: 17}, Drain: probeFigures{P50MS: 10, P99MS: 150}, ResetS: 30, ResetErr: "context deadline exceeded", Verdict: "PASS"},
	}}
	if !r.passed() {
		t.Fatal("every point PASSed, passed says no")
	}
	var b strings.Builder
	r.markdown(&b)
	if want := "| 1M | PASS | 40.0 | 150.00 | 160.00 | 6250 | 70 | 3.0 · 17.0 | 10.0 · 150.0 | failed after 30.0 |\n"; !strings.Contains(b.String(), want) {
		t.Errorf("the table lacks\n%s\nin\n%s", want, b.String())
	}
	var h strings.Builder
	r.html(&h)
	if strings.Count(h.String(), "<svg") != 4 || !strings.Contains(h.String(), ">during the drain</text>") {
		t.Errorf("charts: %s", h.String())
	}
	r.Points[0].Verdict, r.Points[0].Violations = "FAIL", []string{"not every unit back within 10m0s"}
	if r.passed() {
		t.Error("a FAIL, passed says yes")
	}
	b.Reset()
	r.markdown(&b)
	if !strings.Contains(b.String(), "FAIL: not every unit back") {
		t.Errorf("the FAIL's violations are not in the table:\n%s", b.String())
	}
}

func TestReplicasReport(t *testing.T) {
	sale := func(st string, rps float64) replicaSale {
		return replicaSale{buyersPoint: buyersPoint{Strategy: st, Stock: 10_000, Buyers: 20_000, Requests: 20_000, SellOutS: 2.5, AcceptedPerSec: 4000, RequestsPerSec: rps, P99MS: 120, Verdict: "PASS"}, CPUMSPer1k: 180}
	}
	r := &replicasReport{Stock: 10_000, Buyers: 20_000, IdleS: 10, Points: []replicasPoint{
		{Replicas: 1, Idle: idleUse{RSSMB: 60, CPUMSPerS: 12}, Sales: []replicaSale{sale("mysql", 6000), sale("redis-lua", 8000)}},
		{Replicas: 4, Idle: idleUse{RSSMB: 240, CPUMSPerS: 48}, Sales: []replicaSale{sale("mysql", 5000)}},
	}}
	if !r.passed() {
		t.Fatal("every sale PASSed, passed says no")
	}
	if got := r.strategies(); len(got) != 2 || got[0] != "mysql" || got[1] != "redis-lua" {
		t.Errorf("strategies %v", got)
	}
	var b strings.Builder
	r.markdown(&b)
	if want := "| 4 | 240 | 48.0 | mysql | PASS | 2.50 s | 4000 | 5000 | 120.0 | 0 | 180 |\n"; !strings.Contains(b.String(), want) {
		t.Errorf("the table lacks\n%s\nin\n%s", want, b.String())
	}
	var h strings.Builder
	r.html(&h)
	if strings.Count(h.String(), "<svg") != 3 || !strings.Contains(h.String(), "4 replicas") {
		t.Errorf("charts: %s", h.String())
	}
	r.Points[1].Sales[0].Verdict = "FAIL"
	if r.passed() {
		t.Error("a FAIL, passed says yes")
	}
}
