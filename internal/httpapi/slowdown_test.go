package httpapi

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestPlantedSlowdown: a handler that costs 1 ms of CPU, wrapped with a fraction of 0.5, is
// estimated at about that cost per request (its own spinning left out), and each request then
// spins about half of it. The bounds are wide (a factor of 3): the process's CPU time counts the
// test's other goroutines and the runtime's too.
func TestPlantedSlowdown(t *testing.T) {
	const cost = time.Millisecond
	h := PlantedSlowdown(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { Spin(cost) }), 0.5)
	s, ok := h.(*slowdown)
	if !ok {
		t.Fatalf("PlantedSlowdown(…, 0.5) is a %T", h)
	}
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	for start := time.Now(); time.Since(start) < 700*time.Millisecond; {
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	spun0, n0 := s.spun.Load(), s.requests.Load()
	for range 100 {
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	per := time.Duration(s.perReq.Load())
	spin := time.Duration((s.spun.Load() - spun0) / (s.requests.Load() - n0))
	if per < cost/3 || per > 3*cost {
		t.Errorf("estimated %v of CPU per request, want about %v", per, cost)
	}
	if spin < cost/6 || spin > 3*cost/2 {
		t.Errorf("spun %v per request, want about half of %v", spin, cost)
	}
}

// TestPlantedSlowdownOff: no fraction, no wrapper.
func TestPlantedSlowdownOff(t *testing.T) {
	h := http.NotFoundHandler()
	if got := PlantedSlowdown(h, 0); got == nil || func() bool { _, ok := got.(*slowdown); return ok }() {
		t.Errorf("PlantedSlowdown(h, 0) = %T, want h itself", got)
	}
}
