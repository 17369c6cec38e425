package yardstick

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seckill-go/seckill-go/api/client"
)

// Blast is one run of the lean load client: Workers goroutines, each sending one purchase at a
// time over keep-alive connections, request n to Targets[n mod len(Targets)], every request from
// a buyer of its own (user b<RunID>-<n>) and, with IdempotencyKeys, with a key of its own
// (k<RunID>-<n>). It runs for Warmup + Duration, or until Requests requests were sent.
//
// It speaks HTTP/1.1 over raw TCP connections rather than through net/http: on this 2-core
// machine the client shares the CPU with the servers it measures, and net/http's Transport, even
// tuned, costs about three times the client CPU per request (43–47 µs against 16 µs on the bare
// gin ceiling, 64 connections, BenchmarkClientCost) and reaches 0.5–0.7 of the rate. The same
// client measures the ceiling and the app, so their ratio compares like with like.
type Blast struct {
	// Targets are base URLs on a loopback address, e.g. http://127.0.0.1:8081; nothing else is
	// accepted.
	Targets   []string
	ProductID int64
	// Workers is the number of requests in flight [64]; each worker keeps one connection per
	// target.
	Workers int
	// Warmup is sent and counted in Sent and Answers, but not in the measured window.
	Warmup time.Duration
	// Duration is the measured window, after Warmup. With Requests > 0 and no Duration, the
	// window ends with the last answer.
	Duration time.Duration
	// Requests, when above 0, bounds the requests sent in all, warm-up included.
	Requests int
	// RunID makes the buyers of this run distinct from every other run's: 1–16 letters or digits.
	RunID string
	// IdempotencyKeys sends an Idempotency-Key header with each request.
	IdempotencyKeys bool
	// Timeout bounds one request [10s]; a request that times out counts as no answer.
	Timeout time.Duration
	// Read sends GET /api/v1/products/{ProductID} instead of a purchase: the read path.
	Read bool
	// OnAnswer, if set, is called with every answer's status (0: none), when its request was
	// sent and when it was answered, from the workers' goroutines, concurrently.
	OnAnswer func(status int, sent, answered time.Time)
}

// Result is what a Blast got.
type Result struct {
	Targets []string `json:"targets"`
	Workers int      `json:"workers"`
	// Sent counts every request, warm-up included.
	Sent int `json:"sent"`
	// Answers counts every answer, warm-up included, by status and error code: "202",
	// "409 sold_out", "0 no answer".
	Answers map[string]int `json:"answers"`
	// Status counts the same by status alone; 0 is no answer (a transport error or a timeout).
	Status map[int]int `json:"status"`
	// Failures are the first few transport errors, for the report.
	Failures []string `json:"failures,omitempty"`

	// The measured window: the answers that arrived after the warm-up and before its end.
	Seconds  float64         `json:"seconds"`
	Measured map[int]int     `json:"measured"`        // answers in the window by status
	Latency  map[int]Latency `json:"latency"`         // their latency by status
	All      Latency         `json:"latency_all"`     // the latency of every answer in the window
	PerSec   float64         `json:"answers_per_sec"` // answers in the window ÷ Seconds
}

// PerSecOf is the rate of answers with the status in the measured window.
func (r *Result) PerSecOf(status int) float64 {
	if r.Seconds <= 0 {
		return 0
	}
	return float64(r.Measured[status]) / r.Seconds
}

var runIDPattern = regexp.MustCompile(`^[A-Za-z0-9]{1,16}$`)

// maxBlast bounds a Blast in time whatever its settings say.
const maxBlast = 10 * time.Minute

func (b *Blast) validate() error {
	switch {
	case len(b.Targets) == 0:
		return errors.New("blast: no target")
	case b.ProductID <= 0:
		return errors.New("blast: no product id")
	case !runIDPattern.MatchString(b.RunID):
		return fmt.Errorf("blast: run id %q: want 1–16 letters or digits", b.RunID)
	case b.Duration <= 0 && b.Requests <= 0:
		return errors.New("blast: give a Duration or a number of Requests")
	case b.Warmup < 0 || b.Duration < 0 || b.Requests < 0 || b.Warmup+b.Duration > maxBlast:
		return fmt.Errorf("blast: warm-up %s + duration %s: at most %s, none negative", b.Warmup, b.Duration, maxBlast)
	case b.Workers < 0 || b.Workers > 4096:
		return fmt.Errorf("blast: %d workers: want 1 to 4096", b.Workers)
	}
	for _, t := range b.Targets {
		if _, err := loopbackHost(t); err != nil {
			return err
		}
	}
	return nil
}

// loopbackHost returns the host:port of a base URL on a loopback address.
func loopbackHost(base string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("blast: target %q: %w", base, err)
	}
	ip := net.ParseIP(u.Hostname())
	if u.Scheme != "http" || u.Port() == "" || (u.Path != "" && u.Path != "/") || (u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback())) {
		return "", fmt.Errorf("blast: target %q: want http://127.0.0.1:port (loopback only, no path)", base)
	}
	return u.Host, nil
}

// Run sends the requests and tallies the answers. It returns an error only for bad settings or
// when ctx ends; failed requests are answers of status 0.
func (b Blast) Run(ctx context.Context) (*Result, error) {
	if b.Workers == 0 {
		b.Workers = 64
	}
	if b.Timeout <= 0 {
		b.Timeout = 10 * time.Second
	}
	if err := b.validate(); err != nil {
		return nil, err
	}
	hosts := make([]string, len(b.Targets))
	for i, t := range b.Targets {
		hosts[i], _ = loopbackHost(t)
	}
	path, err := requestPath(b.ProductID, b.Read)
	if err != nil {
		return nil, err
	}

	start := time.Now()
	windowStart := start.Add(b.Warmup)
	stopAt := start.Add(maxBlast)
	if b.Duration > 0 {
		stopAt = windowStart.Add(b.Duration)
	}
	var next atomic.Int64
	workers := make([]*worker, b.Workers)
	var wg sync.WaitGroup
	for i := range workers {
		w := &worker{blast: &b, hosts: hosts, path: path, conns: make([]*conn, len(hosts)), tally: newTally()}
		workers[i] = w
		wg.Go(func() {
			defer w.close()
			w.run(ctx, &next, windowStart, stopAt)
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	end := time.Now() // just after the last answer
	if end.After(stopAt) {
		end = stopAt // answers after the window's end are not in it
	}
	return b.result(workers, end.Sub(windowStart).Seconds()), nil
}

// run sends requests, the n-th of the blast as next counts them, until ctx ends, the blast has
// sent its Requests or stopAt has come; it tallies the answers that arrived from windowStart to
// stopAt as measured.
func (w *worker) run(ctx context.Context, next *atomic.Int64, windowStart, stopAt time.Time) {
	b := w.blast
	for ctx.Err() == nil {
		n := next.Add(1) - 1
		if b.Requests > 0 && n >= int64(b.Requests) {
			return
		}
		t0 := time.Now()
		if !t0.Before(stopAt) {
			return
		}
		status, code, err := w.do(int(n%int64(len(w.hosts))), n, t0)
		t1 := time.Now()
		w.tally.add(status, code, err, t1.Sub(t0), !t1.Before(windowStart) && !t1.After(stopAt))
		if b.OnAnswer != nil {
			b.OnAnswer(status, t0, t1)
		}
		if err != nil {
			// A refused or broken connection fails at once: do not spin on it.
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
}

// result merges the workers' tallies into the blast's Result, whose window lasted seconds.
func (b *Blast) result(workers []*worker, seconds float64) *Result {
	sum := newTally()
	for _, w := range workers {
		sum.merge(w.tally)
	}
	r := &Result{
		Targets: b.Targets, Workers: b.Workers, Sent: sum.sent,
		Answers: sum.answers, Status: sum.status, Failures: sum.failures,
		Seconds: seconds, Measured: map[int]int{}, Latency: map[int]Latency{},
	}
	var all []time.Duration
	for status, lat := range sum.window {
		r.Measured[status] = len(lat)
		all = append(all, lat...)
		r.Latency[status] = Percentiles(lat)
	}
	r.All = Percentiles(all)
	if r.Seconds > 0 {
		r.PerSec = float64(len(all)) / r.Seconds
	}
	return r
}

// tally is one worker's count of answers; the workers' are merged at the end.
type tally struct {
	sent     int
	answers  map[string]int
	status   map[int]int
	window   map[int][]time.Duration
	failures []string
}

const maxFailures = 5

func newTally() *tally {
	return &tally{answers: map[string]int{}, status: map[int]int{}, window: map[int][]time.Duration{}}
}

func (t *tally) add(status int, code string, err error, lat time.Duration, inWindow bool) {
	t.sent++
	t.status[status]++
	switch {
	case err != nil:
		t.answers["0 no answer"]++
		if len(t.failures) < maxFailures {
			t.failures = append(t.failures, err.Error())
		}
	case code != "":
		t.answers[strconv.Itoa(status)+" "+code]++
	default:
		t.answers[strconv.Itoa(status)]++
	}
	if inWindow {
		t.window[status] = append(t.window[status], lat)
	}
}

func (t *tally) merge(o *tally) {
	t.sent += o.sent
	for k, v := range o.answers {
		t.answers[k] += v
	}
	for k, v := range o.status {
		t.status[k] += v
	}
	for k, v := range o.window {
		t.window[k] = append(t.window[k], v...)
	}
	for _, f := range o.failures {
		if len(t.failures) < maxFailures {
			t.failures = append(t.failures, f)
		}
	}
}

// worker sends one request at a time, each on its target's keep-alive connection.
type worker struct {
	blast *Blast
	hosts []string
	path  string
	conns []*conn
	req   []byte // the request being written, reused
	body  []byte // the start of the answer's body, reused
	tally *tally
}

type conn struct {
	c  net.Conn
	br *bufio.Reader
}

func (w *worker) close() {
	for _, c := range w.conns {
		if c != nil {
			c.c.Close()
		}
	}
}

// do sends request n to target i and reads its answer: the status and, for an error answer, the
// error code of its body.
func (w *worker) do(i int, n int64, now time.Time) (status int, code string, err error) {
	c := w.conns[i]
	if c == nil {
		nc, err := net.DialTimeout("tcp", w.hosts[i], w.blast.Timeout)
		if err != nil {
			return 0, "", err
		}
		c = &conn{c: nc, br: bufio.NewReaderSize(nc, 4096)}
		w.conns[i] = c
	}
	_ = c.c.SetDeadline(now.Add(w.blast.Timeout))
	w.req = w.appendRequest(w.req[:0], i, n)
	if w.body == nil {
		w.body = make([]byte, 512)
	}
	status, size, closing, err := func() (int, int, bool, error) {
		if _, err := c.c.Write(w.req); err != nil {
			return 0, 0, true, err
		}
		return readResponse(c.br, w.body)
	}()
	if err != nil || closing {
		c.c.Close()
		w.conns[i] = nil
	}
	if err != nil {
		return 0, "", err
	}
	if status >= 300 {
		code = errorCode(w.body[:size])
	}
	return status, code, nil
}

// requestPath is the path of the blast's requests, as the generated client (api/client) writes
// it: the product's purchase, or for a Read blast the product.
func requestPath(productID int64, read bool) (string, error) {
	const server = "http://blast.invalid/" // the path alone is kept
	var req *http.Request
	var err error
	if read {
		req, err = client.NewGetProductRequest(server, productID, nil)
	} else {
		req, err = client.NewPurchaseRequestWithBody(server, productID, nil, "", nil)
	}
	if err != nil {
		return "", err
	}
	return req.URL.RequestURI(), nil
}

// appendRequest writes request n: POST <path> with {"user_id":"b<run>-<n>","quantity":1}, or,
// for a Read blast, GET <path>.
func (w *worker) appendRequest(b []byte, i int, n int64) []byte {
	if w.blast.Read {
		b = append(b, "GET "...)
		b = append(b, w.path...)
		b = append(b, " HTTP/1.1\r\nHost: "...)
		b = append(b, w.hosts[i]...)
		return append(b, "\r\n\r\n"...)
	}
	id := strconv.AppendInt([]byte(w.blast.RunID+"-"), n, 10)
	b = append(b, "POST "...)
	b = append(b, w.path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, w.hosts[i]...)
	b = append(b, "\r\nContent-Type: application/json\r\n"...)
	if w.blast.IdempotencyKeys {
		b = append(b, "Idempotency-Key: k"...)
		b = append(b, id...)
		b = append(b, "\r\n"...)
	}
	b = append(b, "Content-Length: "...)
	b = strconv.AppendInt(b, int64(len(`{"user_id":"b","quantity":1}`)+len(id)), 10)
	b = append(b, "\r\n\r\n"...)
	b = append(b, `{"user_id":"b`...)
	b = append(b, id...)
	b = append(b, `","quantity":1}`...)
	return b
}

var errMalformed = errors.New("malformed HTTP response")

// readResponse reads one HTTP/1.1 response from br: its status, the first len(body) bytes of
// its body into body (n of them), and whether the server closes the connection after it. It
// understands Content-Length, chunked bodies and bodies that run to the end of the connection,
// which is all a Go server sends.
func readResponse(br *bufio.Reader, body []byte) (status, n int, closing bool, err error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return 0, 0, true, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return 0, 0, true, fmt.Errorf("%w: status line %q", errMalformed, line)
	}
	if status, err = strconv.Atoi(string(line[9:12])); err != nil {
		return 0, 0, true, fmt.Errorf("%w: status line %q", errMalformed, line)
	}
	closing = line[7] == '0' // HTTP/1.0
	length, chunked := -1, false
	for {
		line, err = br.ReadSlice('\n')
		if err != nil {
			return 0, 0, true, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return 0, 0, true, fmt.Errorf("%w: header %q", errMalformed, line)
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil || length < 0 {
				return 0, 0, true, fmt.Errorf("%w: Content-Length %q", errMalformed, value)
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.Contains(bytes.ToLower(value), []byte("chunked"))
		case bytes.EqualFold(name, []byte("Connection")):
			closing = closing || bytes.Contains(bytes.ToLower(value), []byte("close"))
		}
	}
	switch {
	case status == 204 || status == 304 || status < 200:
		return status, 0, closing, nil
	case chunked:
		n, err = readChunked(br, body)
	case length >= 0:
		n, err = readBody(br, body, length)
	default: // the body runs to the end of the connection
		n, err = readBody(br, body, -1)
		closing = true
	}
	if err != nil {
		return 0, 0, true, err
	}
	return status, n, closing, nil
}

// readBody reads length bytes (-1: up to EOF), keeping the first len(body).
func readBody(br *bufio.Reader, body []byte, length int) (int, error) {
	if length < 0 {
		n, err := io.ReadFull(br, body)
		if err == io.ErrUnexpectedEOF || err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		_, err = io.Copy(io.Discard, br)
		return n, err
	}
	n, err := io.ReadFull(br, body[:min(length, len(body))])
	if err != nil {
		return n, err
	}
	_, err = br.Discard(length - n)
	return n, err
}

// readChunked reads a chunked body and its trailer, keeping the first len(body) bytes.
func readChunked(br *bufio.Reader, body []byte) (int, error) {
	n := 0
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return n, err
		}
		sizeText, _, _ := bytes.Cut(bytes.TrimRight(line, "\r\n"), []byte(";"))
		size, err := strconv.ParseInt(string(bytes.TrimSpace(sizeText)), 16, 64)
		if err != nil || size < 0 {
			return n, fmt.Errorf("%w: chunk size %q", errMalformed, line)
		}
		if size == 0 {
			for { // the trailer, up to an empty line
				line, err := br.ReadSlice('\n')
				if err != nil {
					return n, err
				}
				if len(bytes.TrimRight(line, "\r\n")) == 0 {
					return n, nil
				}
			}
		}
		got, err := readBody(br, body[n:], int(size))
		n += got
		if err != nil {
			return n, err
		}
		if _, err := br.Discard(2); err != nil { // the CRLF after the chunk
			return n, err
		}
	}
}

// errorCode is the code of an error body {"error":{"code":"sold_out",…}}, found by its text: a
// JSON decoder per answer would cost the shared CPU more than the answer itself. "" if none.
func errorCode(body []byte) string {
	_, rest, ok := bytes.Cut(body, []byte(`"code":"`))
	if !ok {
		return ""
	}
	code, _, ok := bytes.Cut(rest, []byte(`"`))
	if !ok || len(code) > 64 {
		return ""
	}
	return string(code)
}
