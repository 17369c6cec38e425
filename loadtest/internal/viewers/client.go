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

// scanProductEvent reads id, stock and state from the flat "product" object of data; done is
// false when data is not of that shape (no such object, a snapshot's items, an escaped state),
// which productFigures then reads.
func scanProductEvent(data []byte, productID int64) (f figures, ok, done bool) {
	if bytes.Contains(data, []byte(`"items":`)) {
		return figures{}, false, false
	}
	i := bytes.Index(data, []byte(`"product":{`))
	if i < 0 {
		return figures{}, false, false
	}
	obj, ok := flatObject(data[i+len(`"product":`):])
	if !ok {
		return figures{}, false, false
	}
	id, okID := intField(obj, `"id":`)
	stock, okStock := intField(obj, `"stock":`)
	if !okID || !okStock {
		return figures{}, false, false
	}
	state := ""
	if j := bytes.Index(obj, []byte(`"state":"`)); j >= 0 {
		rest := obj[j+len(`"state":"`):]
		k := bytes.IndexByte(rest, '"')
		if k < 0 || bytes.IndexByte(rest[:k], '\\') >= 0 {
			return figures{}, false, false
		}
		state = string(rest[:k])
	}
	if id != productID {
		return figures{}, false, true
	}
	return figures{stock: int(stock), state: state}, true, true
}

// flatObject returns the JSON object at the start of b, up to its closing brace, if it holds no
// object or array (a product's fields are all scalars); strings may hold anything.
func flatObject(b []byte) ([]byte, bool) {
	inString, escaped := false, false
	for i := 1; i < len(b); i++ {
		c := b[i]
		switch {
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			return nil, false
		case c == '}':
			return b[:i+1], true
		}
	}
	return nil, false
}

// intField reads the integer after key in a flat object: key cannot occur inside a string
// (its quotes would be escaped there).
func intField(obj []byte, key string) (int64, bool) {
	j := bytes.Index(obj, []byte(key))
	if j < 0 {
		return 0, false
	}
	rest := bytes.TrimLeft(obj[j+len(key):], " ")
	end := 0
	for end < len(rest) && (rest[end] == '-' || (rest[end] >= '0' && rest[end] <= '9')) {
		end++
	}
	n, err := strconv.ParseInt(string(rest[:end]), 10, 64)
	return n, err == nil
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
