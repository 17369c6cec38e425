package viewers

import (
	"net/http"
	"slices"
	"time"

	"github.com/seckill-go/seckill-go/loadtest/internal/yardstick"
)

// Summary is a crowd's figures for a report.
type Summary struct {
	Mode    Mode     `json:"mode"`
	Viewers int      `json:"viewers"`
	Targets []string `json:"targets"`
	// Connected is how many viewers were connected (stream) or had been answered (poll) when
	// the measured window began.
	Connected int `json:"connected_at_start"`
	// WindowSeconds is the measured window: the attack, from its first request to its last answer.
	WindowSeconds float64 `json:"window_seconds"`

	// Reads are the polls (poll) or the stream connections (stream) answered in the window, per
	// second, and their latency (a stream's: until its first event).
	Reads       int               `json:"reads"`
	ReadsPerSec float64           `json:"reads_per_sec"`
	ReadLatency yardstick.Latency `json:"read_latency"`
	// NotModifiedShare is the share of the window's 200 and 304 answers that were 304.
	NotModifiedShare float64 `json:"not_modified_share"`
	// Status counts every answer of the crowd's life by status, 0 for no answer (a transport error).
	Status map[int]int `json:"status"`
	// ByKind counts the same by what was read: product, stats, list, stream.
	ByKind map[string]int `json:"by_kind"`

	// Events are the stream events read in the crowd's life, by type; EventsPerSec those read in
	// the window, per second, and PerViewerPerSec that ÷ the viewers.
	Events          map[string]int `json:"events,omitempty"`
	EventsPerSec    float64        `json:"events_per_sec,omitempty"`
	PerViewerPerSec float64        `json:"events_per_viewer_per_sec,omitempty"`
	Drops           int            `json:"drops,omitempty"`
	Comments        int            `json:"comments,omitempty"`

	// Lag is how late viewers learnt of each unit sold, timed from its 202's arrival (by which it
	// was committed: a lower bound of commit → seen); LagFromSend from the sending of the request
	// whose 202 was the k-th sent (before which it was not: an upper bound).
	Lag         Lag `json:"lag"`
	LagFromSend Lag `json:"lag_from_send"`

	// SoldOutSeen is how many viewers read the sale sold out; SoldOutLag how long after the
	// last unit's 202 they did (ms).
	SoldOutSeen int               `json:"sold_out_seen"`
	SoldOutLag  yardstick.Latency `json:"sold_out_lag"`

	Failures []string `json:"failures,omitempty"`
}

// Summarize makes r's figures. The window is [from, to]; initial is the sale's stock; sold are
// the arrival times of the first-time 202s and sent the send times of the same requests.
func Summarize(r *Result, from, to time.Time, connected, initial int, sold, sent []time.Time) Summary {
	s := Summary{
		Mode: r.Mode, Viewers: r.Count, Targets: r.Targets, Connected: connected,
		Status: map[int]int{}, ByKind: map[string]int{}, Events: r.Events,
		Drops: r.Drops, Comments: r.Comments, Failures: r.Failures,
	}
	secs := to.Sub(from).Seconds()
	if secs > 0 {
		s.WindowSeconds = secs
	}
	in := func(t time.Time) bool { return !t.Before(from) && !t.After(to) }
	var lat []time.Duration
	fresh, revalidated := 0, 0
	for _, rd := range r.Reads {
		s.Status[rd.Status]++
		s.ByKind[rd.Kind]++
		if !in(rd.At) {
			continue
		}
		s.Reads++
		if rd.Status != 0 {
			lat = append(lat, rd.Latency)
		}
		switch rd.Status {
		case http.StatusOK:
			fresh++
		case http.StatusNotModified:
			revalidated++
		}
	}
	s.ReadLatency = yardstick.Percentiles(lat)
	if fresh+revalidated > 0 {
		s.NotModifiedShare = float64(revalidated) / float64(fresh+revalidated)
	}
	events := 0
	for _, t := range r.EventTimes {
		if in(t) {
			events++
		}
	}
	if secs > 0 {
		s.ReadsPerSec = float64(s.Reads) / secs
		s.EventsPerSec = float64(events) / secs
		if r.Count > 0 {
			s.PerViewerPerSec = s.EventsPerSec / float64(r.Count)
		}
	}
	if len(s.Events) == 0 {
		s.Events = nil
	}
	sold, sent = Sorted(sold), Sorted(sent)
	s.Lag = Lags(initial, sold, r.Lows)
	s.LagFromSend = Lags(initial, sent, r.Lows)
	var soldOutLag []time.Duration
	for _, at := range r.SoldOutAt {
		if at.IsZero() {
			continue
		}
		s.SoldOutSeen++
		if len(sold) > 0 {
			soldOutLag = append(soldOutLag, max(0, at.Sub(sold[len(sold)-1])))
		}
	}
	s.SoldOutLag = yardstick.Percentiles(soldOutLag)
	return s
}

// FiveXX counts the answers of status 500 and above.
func (s Summary) FiveXX() int {
	n := 0
	for code, c := range s.Status {
		if code >= 500 {
			n += c
		}
	}
	return n
}

// TooMany counts the 429 answers.
func (s Summary) TooMany() int { return s.Status[http.StatusTooManyRequests] }

// NoAnswer counts the requests that got no answer (transport errors: a replica killed, say).
func (s Summary) NoAnswer() int { return s.Status[0] }

// SoldOutShare is the share of the viewers that read the sale sold out.
func (s Summary) SoldOutShare() float64 {
	if s.Viewers == 0 {
		return 0
	}
	return float64(s.SoldOutSeen) / float64(s.Viewers)
}

// Statuses lists the statuses seen, in order.
func (s Summary) Statuses() []int {
	var codes []int
	for c := range s.Status {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	return codes
}
