package viewers

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// conn is one viewer's HTTP/1.1 connection, as a browser tab keeps one: requests one at a time,
// kept alive, redialled after a failure. It is net/http's wire format without its Transport: the
// request is written by hand and the answer read with http.ReadResponse, so that a viewer costs
// one goroutine and one socket, which thousands of them on the load test's two cores need.
type conn struct {
	dialer net.Dialer
	host   string // host:port of the open connection
	nc     net.Conn
	br     *bufio.Reader
	// unwatch stops the watch that closes nc when the crowd stops.
	unwatch func() bool
}

// localAddr is viewer i's own loopback address, 127.1.x.y, when each viewer is a client of its
// own: the server's per-client limits then count it apart, as they would count a browser.
func localAddr(i int) *net.TCPAddr {
	i %= 250 * 256
	return &net.TCPAddr{IP: net.IPv4(127, 1, byte(i/250), byte(i%250+1))}
}

// hostOf is the host:port of a base URL (http://host:port).
func hostOf(base string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	if u.Scheme != "http" || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return "", fmt.Errorf("viewer target %q: want http://host:port", base)
	}
	if u.Port() == "" {
		return u.Host + ":80", nil
	}
	return u.Host, nil
}

// CheckTargets says whether every target is a base URL viewers can read from (http://host:port).
func CheckTargets(targets []string) error {
	for _, t := range targets {
		if _, err := hostOf(t); err != nil {
			return err
		}
	}
	return nil
}

// get sends GET path to host with the extra header lines (each "Name: value") and returns the
// answer, its body unread. deadline bounds the whole exchange (zero: none; ctx still ends it).
func (c *conn) get(ctx context.Context, host, path string, header []string, deadline time.Time) (*http.Response, error) {
	if c.nc != nil && c.host != host {
		c.close()
	}
	if c.nc == nil {
		d := c.dialer
		d.Timeout = 5 * time.Second
		nc, err := d.DialContext(ctx, "tcp", host)
		if err != nil {
			return nil, err
		}
		c.nc, c.host, c.br = nc, host, bufio.NewReaderSize(nc, 4096)
		// The crowd's end interrupts whatever the viewer waits for on this connection.
		c.unwatch = context.AfterFunc(ctx, func() { nc.Close() })
	}
	_ = c.nc.SetDeadline(deadline)
	var b strings.Builder
	b.WriteString("GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\nUser-Agent: seckill-loadtest-viewer\r\n")
	for _, h := range header {
		b.WriteString(h + "\r\n")
	}
	b.WriteString("\r\n")
	if _, err := c.nc.Write([]byte(b.String())); err != nil {
		c.close()
		return nil, err
	}
	res, err := http.ReadResponse(c.br, nil)
	if err != nil {
		c.close()
		return nil, err
	}
	return res, nil
}

func (c *conn) close() {
	if c.nc != nil {
		c.unwatch()
		c.nc.Close()
		c.nc, c.br, c.unwatch = nil, nil, nil
	}
}

// silenceReader pushes its connection's deadline to silence ahead whenever a read returns, at
// most every silence/8: a stream that says nothing, not even its pings, for silence is dropped.
type silenceReader struct {
	r       io.Reader
	nc      net.Conn
	silence time.Duration
	now     func() time.Time
	last    time.Time
}

func (s *silenceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if now := s.now(); now.Sub(s.last) > s.silence/8 {
		_ = s.nc.SetDeadline(now.Add(s.silence))
		s.last = now
	}
	return n, err
}

// figures are what a viewer reads of the product it watches.
type figures struct {
	stock int
	state string // "" from an answer without one (stats, or a server before the read side)
}

// soldOut says whether the figures show the sale sold out: its state says so, or, from an
// answer without a state, no stock is left.
func (f figures) soldOut() bool {
	return f.state == "sold_out" || (f.state == "" && f.stock <= 0)
}

type productFields struct {
	ID    int64  `json:"id"`
	Stock *int   `json:"stock"`
	State string `json:"state"`
}

// eventFigures reads the watched product's figures from an event's data: by a scan of the
// "product" object's own fields when the data holds one product ({"product":P,…}, every event
// but the snapshot), by productFigures otherwise. Thousands of streams read several events a
// second each on the machine the replicas run on: encoding/json took 18 µs an event, the scan
// takes well under one (BenchmarkEventFigures).
func eventFigures(data []byte, productID int64) (figures, bool) {
	if f, ok, done := scanProductEvent(data, productID); done {
		return f, ok
	}
	return productFigures(data, productID)
}

// scanProductEvent reads id, stock and state from the "product" object of data; done is false
// when data is not of that shape (no such object, a snapshot's items, an escaped state, a field
// that is not a number), which productFigures then reads.
func scanProductEvent(data []byte, productID int64) (f figures, ok, done bool) {
	if bytes.Contains(data, []byte(`"items":`)) {
		return figures{}, false, false
	}
	i := bytes.Index(data, []byte(`"product":{`))
	if i < 0 {
		return figures{}, false, false
	}
	var id, stock int64
	var haveID, haveStock, bad bool
	state := ""
	well := objectFields(data[i+len(`"product":`):], func(key, value []byte) {
		var err error
		switch string(key) {
		case "id":
			id, err = strconv.ParseInt(string(value), 10, 64)
			haveID = err == nil
		case "stock":
			stock, err = strconv.ParseInt(string(value), 10, 64)
			haveStock = err == nil
		case "state":
			if len(value) < 2 || value[0] != '"' || bytes.IndexByte(value, '\\') >= 0 {
				bad = true
				return
			}
			state = string(value[1 : len(value)-1])
		}
	})
	if !well || bad || !haveID || !haveStock {
		return figures{}, false, false
	}
	if id != productID {
		return figures{}, false, true
	}
	return figures{stock: int(stock), state: state}, true, true
}

// objectFields calls fn with each member of the JSON object at the start of b — its key as
// written between the quotes, its value's bytes (a string with its quotes; an object or array
// whole, not looked into) — and reports whether the object was read to its closing brace. It
// checks the structure, not every token: what it cannot read, productFigures does.
func objectFields(b []byte, fn func(key, value []byte)) bool {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return true
	}
	for i < len(b) {
		if b[i] != '"' {
			return false
		}
		kEnd := stringEnd(b, i)
		if kEnd < 0 {
			return false
		}
		key := b[i+1 : kEnd-1]
		i = skipSpace(b, kEnd)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = skipSpace(b, i+1)
		vEnd := valueEnd(b, i)
		if vEnd <= i {
			return false
		}
		fn(key, b[i:vEnd])
		i = skipSpace(b, vEnd)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case '}':
			return true
		case ',':
			i = skipSpace(b, i+1)
		default:
			return false
		}
	}
	return false
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index just past the string that starts at b[i] (a quote), or -1.
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// valueEnd returns the index just past the value that starts at b[i], or -1: a string, an object
// or array (its nesting followed, strings inside skipped), or a scalar up to the next delimiter.
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				if j = stringEnd(b, j) - 1; j < 0 {
					return -1
				}
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\n' && b[j] != '\r' && b[j] != '\t' {
		j++
	}
	return j
}

// productFigures reads the watched product's figures from any public answer that carries them: a
// product (GET /products/{id}), viewer stats (GET /products/{id}/stats: a stock, no id), the list
// ({"products":[…]}), an event ({"product":P,"stats":V}) or a snapshot ({"items":[{"product":P},…]}).
// ok is false when the answer does not mention the product.
func productFigures(body []byte, productID int64) (figures, bool) {
	var v struct {
		productFields
		Product *productFields `json:"product"`
		Items   []struct {
			Product *productFields `json:"product"`
		} `json:"items"`
		Products []productFields `json:"products"`
	}
	if json.Unmarshal(body, &v) != nil {
		return figures{}, false
	}
	of := func(p *productFields) (figures, bool) {
		if p == nil || p.Stock == nil || (p.ID != 0 && p.ID != productID) {
			return figures{}, false
		}
		return figures{stock: *p.Stock, state: p.State}, true
	}
	if f, ok := of(v.Product); ok {
		return f, true
	}
	for _, it := range v.Items {
		if f, ok := of(it.Product); ok && it.Product.ID == productID {
			return f, true
		}
	}
	for i := range v.Products {
		if f, ok := of(&v.Products[i]); ok && v.Products[i].ID == productID {
			return f, true
		}
	}
	return of(&v.productFields)
}
