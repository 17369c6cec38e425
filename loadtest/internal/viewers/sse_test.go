package viewers

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// readAll reads every event of stream.
func readAll(t testing.TB, r *SSEReader) []Event {
	t.Helper()
	var out []Event
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
}

func TestSSEReader(t *testing.T) {
	for _, tc := range []struct {
		name     string
		stream   string
		want     []Event
		retry    time.Duration
		comments int
		lastID   string
	}{
		{
			name:   "the read side's stream",
			stream: "retry: 2137\n\nid: b1.1\nevent: snapshot\ndata: {\"items\":[]}\n\n: ping\n\nid: b1.2\nevent: stock\ndata: {\"product\":{\"id\":7,\"stock\":3}}\n\n",
			want: []Event{
				{ID: "b1.1", Type: "snapshot", Data: `{"items":[]}`},
				{ID: "b1.2", Type: "stock", Data: `{"product":{"id":7,"stock":3}}`},
			},
			retry: 2137 * time.Millisecond, comments: 1, lastID: "b1.2",
		},
		{
			name:   "multi-line data is joined with LF, one space after the colon dropped, not two",
			stream: "data: one\ndata:two\ndata:  three\ndata\n\n",
			want:   []Event{{Type: "message", Data: "one\ntwo\n three\n"}},
		},
		{
			name:   "CRLF and CR end lines too",
			stream: "event: a\r\ndata: x\r\n\r\nevent: b\rdata: y\r\rdata: z\r\n\n",
			want:   []Event{{Type: "a", Data: "x"}, {Type: "b", Data: "y"}, {Type: "message", Data: "z"}},
		},
		{
			name:     "comments and unknown fields are skipped; an event without data is not dispatched",
			stream:   ":hello\n: ping\nfoo: bar\nevent: lonely\n\ndata: after\n\n",
			want:     []Event{{Type: "message", Data: "after"}},
			comments: 2,
		},
		{
			name:   "the id carries over to later events; an empty id clears it; an id with NUL is ignored",
			stream: "id: 1\ndata: a\n\ndata: b\n\nid: 2\x00x\ndata: c\n\nid\ndata: d\n\n",
			want: []Event{
				{ID: "1", Type: "message", Data: "a"}, {ID: "1", Type: "message", Data: "b"},
				{ID: "1", Type: "message", Data: "c"}, {ID: "", Type: "message", Data: "d"},
			},
		},
		{
			name:   "a retry that is not all digits is ignored",
			stream: "retry: 1500\nretry: 2s\nretry: -1\ndata: x\n\n",
			want:   []Event{{Type: "message", Data: "x"}},
			retry:  1500 * time.Millisecond,
		},
		{
			name:   "an event cut off by the end of the stream is not dispatched",
			stream: "data: whole\n\ndata: half\n",
			want:   []Event{{Type: "message", Data: "whole"}},
		},
		{
			name:   "a line cut off by the end of the stream is no line",
			stream: "data: whole\n\ndata: half",
			want:   []Event{{Type: "message", Data: "whole"}},
		},
		{
			name:   "a BOM at the start is dropped",
			stream: "\uFEFFdata: x\n\n",
			want:   []Event{{Type: "message", Data: "x"}},
		},
		{
			name:   "a field name without colon, and an empty data value",
			stream: "data:\n\n",
			want:   []Event{{Type: "message", Data: ""}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// One byte at a time: a CRLF split over two reads must still be one line end.
			r := NewSSEReader(iotest.OneByteReader(strings.NewReader(tc.stream)))
			if diff := cmp.Diff(tc.want, readAll(t, r)); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if r.Retry() != tc.retry || r.Comments() != tc.comments {
				t.Errorf("retry %s, comments %d; want %s, %d", r.Retry(), r.Comments(), tc.retry, tc.comments)
			}
			if tc.lastID != "" && r.LastEventID() != tc.lastID {
				t.Errorf("last event id %q, want %q", r.LastEventID(), tc.lastID)
			}
		})
	}
}

// TestSSEReaderContinue: a reconnection keeps the last event id and the retry, and drops what
// was half read of the broken stream.
func TestSSEReaderContinue(t *testing.T) {
	r := NewSSEReader(strings.NewReader("retry: 1200\nid: a.5\nevent: stock\ndata: 1\n\nevent: stock\ndata: cut"))
	if got := readAll(t, r); len(got) != 1 {
		t.Fatalf("first stream: %v, want one event", got)
	}
	r.Continue(strings.NewReader("data: 2\n\n"))
	if diff := cmp.Diff([]Event{{ID: "a.5", Type: "message", Data: "2"}}, readAll(t, r)); diff != "" {
		t.Errorf("after Continue (-want +got):\n%s", diff)
	}
	if r.LastEventID() != "a.5" || r.Retry() != 1200*time.Millisecond {
		t.Errorf("last id %q, retry %s; want a.5, 1.2s", r.LastEventID(), r.Retry())
	}
}

func TestSSEReaderError(t *testing.T) {
	boom := errors.New("connection reset")
	r := NewSSEReader(io.MultiReader(strings.NewReader("data: x\n\n"), iotest.ErrReader(boom)))
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); !errors.Is(err, boom) {
		t.Errorf("Next after a broken read: %v, want %v", err, boom)
	}
}

func FuzzSSEReader(f *testing.F) {
	f.Add("id: 1\nevent: stock\ndata: {}\n\n: ping\r\n\r\nretry: 10\rdata: x\n\n")
	f.Fuzz(func(t *testing.T, s string) {
		r := NewSSEReader(strings.NewReader(s))
		for range len(s) + 1 {
			ev, err := r.Next()
			if err != nil {
				return
			}
			if ev.Type == "" || strings.ContainsAny(ev.Type, "\r\n") {
				t.Fatalf("event type %q", ev.Type)
			}
		}
		t.Fatal("more events than bytes")
	})
}

// TestFeed: bytes pushed in pieces, cut anywhere (inside a line, between CR and LF, inside the
// BOM), give the events that the stream read whole gives.
func TestFeed(t *testing.T) {
	stream := "\uFEFFretry: 50\r\n\r\nid: b.1\r\nevent: snapshot\r\ndata: {\"a\":1}\r\n\r\n: ping\n\nid: b.2\nevent: stock\ndata: x\ndata: y\n\nevent: sold_out\rdata: z\r\r\n" // a CR last may be half of a CRLF: a live stream's next bytes say
	whole := NewSSEReader(strings.NewReader(stream))
	var want []string
	for {
		ev, err := whole.Next()
		if err != nil {
			break
		}
		want = append(want, ev.Type+" "+ev.Data)
	}
	if len(want) != 3 {
		t.Fatalf("the whole stream gave %q, want 3 events", want)
	}
	for cut := 1; cut < len(stream); cut++ {
		r := NewSSEReader(strings.NewReader(""))
		var got []string
		emit := func(typ string, data []byte) { got = append(got, typ+" "+string(data)) }
		r.Feed([]byte(stream[:cut]), emit)
		r.Feed([]byte(stream[cut:]), emit)
		if strings.Join(got, "|") != strings.Join(want, "|") || r.LastEventID() != "b.2" || r.Retry() != 50*time.Millisecond || r.Comments() != 1 {
			t.Fatalf("cut at %d: %q (id %q, retry %v, comments %d), want %q", cut, got, r.LastEventID(), r.Retry(), r.Comments(), want)
		}
	}
}
