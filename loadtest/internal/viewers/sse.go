package viewers

import (
	"bufio"
	"bytes"
	"io"
	"strconv"
	"strings"
	"time"
)

// Event is one Server-Sent Event as a browser's EventSource dispatches it.
type Event struct {
	// ID is the stream's last event ID once this event was read: its id field, or the last one
	// before it (what a reconnection sends as Last-Event-ID).
	ID string
	// Type is the event field, "message" when there is none.
	Type string
	// Data is the event's data lines joined with "\n".
	Data string
}

// maxLine bounds one line of a stream: a snapshot of many products is one data line.
const maxLine = 4 << 20

// SSEReader reads the events of one text/event-stream body by the rules of the HTML standard's
// event stream interpretation: lines end with CRLF, LF or CR; a line starting with a colon is a
// comment; "field: value" loses one space after the colon; a blank line dispatches the event,
// unless it has no data; an event cut off by the end of the stream is not dispatched. Its last
// event ID and retry setting outlive one body: a reconnection carries them on (Continue).
type SSEReader struct {
	sc       *bufio.Scanner
	first    bool // the next line is the stream's first (a UTF-8 BOM is dropped from it)
	lastID   []byte
	retry    time.Duration
	comments int
	typ      []byte
	data     []byte
	hasData  bool
	pend     []byte // Feed's bytes not yet a whole line
}

// NewSSEReader reads the stream r from its start.
func NewSSEReader(r io.Reader) *SSEReader {
	s := &SSEReader{}
	s.Continue(r)
	return s
}

// Continue reads the body of a reconnection, keeping the last event ID and the retry setting.
// What was half read of the previous body is dropped.
func (s *SSEReader) Continue(r io.Reader) {
	s.sc = bufio.NewScanner(r)
	s.sc.Buffer(make([]byte, 0, 4096), maxLine)
	s.sc.Split(scanSSELines)
	s.first = true
	s.typ, s.data, s.hasData, s.pend = s.typ[:0], s.data[:0], false, s.pend[:0]
}

// Feed reads the stream's next bytes p, pushed by a caller that reads the connection itself,
// and calls emit with each event they complete: its type and its data, which stay valid during
// the call only. Lines split across calls are joined.
func (s *SSEReader) Feed(p []byte, emit func(typ string, data []byte)) {
	buf := p
	if len(s.pend) > 0 {
		s.pend = append(s.pend, p...)
		buf = s.pend
	}
	off := 0
	for off < len(buf) {
		advance, line, _ := scanSSELines(buf[off:], false)
		if advance == 0 {
			break
		}
		off += advance
		if s.first {
			line = bytes.TrimPrefix(line, []byte("\uFEFF"))
			s.first = false
		}
		if typ, data, ok := s.line(line); ok {
			emit(typ, data)
		}
	}
	rest := buf[off:]
	if len(rest) > maxLine {
		rest = nil // a line longer than a reader's bound: dropped, as the scanner would fail on it
	}
	s.pend = append(s.pend[:0], rest...)
}

// LastEventID is the id a reconnection sends as Last-Event-ID ("" when none was received).
func (s *SSEReader) LastEventID() string { return string(s.lastID) }

// Retry is the reconnection time the stream last set with a retry field (0: none).
func (s *SSEReader) Retry() time.Duration { return s.retry }

// Comments counts the comment lines read (the server's keep-alive pings among them).
func (s *SSEReader) Comments() int { return s.comments }

// Next returns the next event; io.EOF when the stream ended cleanly, or the read's error.
func (s *SSEReader) Next() (Event, error) {
	typ, data, err := s.NextView()
	if err != nil {
		return Event{}, err
	}
	return Event{ID: s.LastEventID(), Type: typ, Data: string(data)}, nil
}

// NextView is Next without copies, for the thousands of streams of a crowd: the event's type
// and its data, which stays valid until the next call only.
func (s *SSEReader) NextView() (typ string, data []byte, err error) {
	for s.sc.Scan() {
		line := s.sc.Bytes()
		if s.first {
			line = bytes.TrimPrefix(line, []byte("\uFEFF"))
			s.first = false
		}
		if typ, data, ok := s.line(line); ok {
			return typ, data, nil
		}
	}
	if err := s.sc.Err(); err != nil {
		return "", nil, err
	}
	return "", nil, io.EOF
}

// line processes one line and returns the event it dispatches, if any: its type and data.
func (s *SSEReader) line(line []byte) (string, []byte, bool) {
	if len(line) == 0 {
		if !s.hasData {
			s.typ = s.typ[:0]
			return "", nil, false
		}
		typ := eventType(s.typ)
		data := bytes.TrimSuffix(s.data, []byte("\n"))
		s.typ, s.data, s.hasData = s.typ[:0], s.data[:0], false
		return typ, data, true
	}
	if line[0] == ':' {
		s.comments++
		return "", nil, false
	}
	field, value, found := bytes.Cut(line, []byte(":"))
	if found {
		value = bytes.TrimPrefix(value, []byte(" "))
	}
	switch string(field) {
	case "event":
		s.typ = append(s.typ[:0], value...)
	case "data":
		s.data = append(append(s.data, value...), '\n')
		s.hasData = true
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			s.lastID = append(s.lastID[:0], value...)
		}
	case "retry":
		if len(value) > 0 && strings.Trim(string(value), "0123456789") == "" {
			if ms, err := strconv.ParseInt(string(value), 10, 64); err == nil {
				s.retry = time.Duration(ms) * time.Millisecond
			}
		}
	}
	return "", nil, false
}

// eventType is the type of an event whose event field was b: "message" when there was none,
// the server's own types without a copy.
func eventType(b []byte) string {
	switch string(b) {
	case "":
		return "message"
	case "stock":
		return "stock"
	case "stats":
		return "stats"
	case "sold_out":
		return "sold_out"
	case "snapshot":
		return "snapshot"
	}
	return string(b)
}

// scanSSELines splits at CRLF, LF or CR. A line the stream's end cut off is dropped: it is no
// line, and the event it belonged to is not dispatched.
func scanSSELines(data []byte, atEOF bool) (advance int, token []byte, err error) {
	i := bytes.IndexAny(data, "\r\n")
	switch {
	case i >= 0 && data[i] == '\n':
		return i + 1, data[:i], nil
	case i >= 0 && i+1 < len(data):
		if data[i+1] == '\n' {
			return i + 2, data[:i], nil
		}
		return i + 1, data[:i], nil
	case i >= 0 && atEOF:
		return i + 1, data[:i], nil
	case atEOF && len(data) > 0:
		return len(data), nil, nil
	}
	return 0, nil, nil // a CR at the end of what was read may be half of a CRLF: read on
}
