package deploy

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// ngxDirective is one directive of an nginx configuration: its name, its arguments and, for a
// block (http, server, location…), the directives inside it.
type ngxDirective struct {
	name     string
	args     []string
	block    bool
	children []*ngxDirective
}

// all returns the directives named name directly inside d.
func (d *ngxDirective) all(name string) []*ngxDirective {
	var out []*ngxDirective
	for _, c := range d.children {
		if c.name == name {
			out = append(out, c)
		}
	}
	return out
}

// one returns the first directive named name directly inside d, or nil.
func (d *ngxDirective) one(name string) *ngxDirective {
	if all := d.all(name); len(all) > 0 {
		return all[0]
	}
	return nil
}

// ngxToken is a word of the configuration; special is set for an unquoted {, } or ;.
type ngxToken struct {
	text    string
	special bool
}

// parseNginxConf parses a configuration into a root directive holding the top-level ones. It
// knows as much of nginx's syntax as the template uses: comments, quoted arguments (the
// refusal's JSON holds braces and semicolons), blocks.
func parseNginxConf(conf string) (*ngxDirective, error) {
	var toks []ngxToken
	var word strings.Builder
	inWord := false
	flush := func() {
		if inWord {
			toks = append(toks, ngxToken{text: word.String()})
			word.Reset()
			inWord = false
		}
	}
	for i := 0; i < len(conf); i++ {
		c := conf[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			flush()
		case c == '#' && !inWord:
			for i < len(conf) && conf[i] != '\n' {
				i++
			}
		case c == '{' || c == '}' || c == ';':
			flush()
			toks = append(toks, ngxToken{text: string(c), special: true})
		case (c == '"' || c == '\'') && !inWord:
			j := i + 1
			for ; j < len(conf) && conf[j] != c; j++ {
				if conf[j] == '\\' {
					j++
				}
			}
			if j >= len(conf) {
				return nil, fmt.Errorf("unterminated quote at byte %d", i)
			}
			toks = append(toks, ngxToken{text: conf[i+1 : j]})
			i = j
		default:
			word.WriteByte(c)
			inWord = true
		}
	}
	flush()

	pos := 0
	var parse func(d *ngxDirective, nested bool) error
	parse = func(parent *ngxDirective, nested bool) error {
		var cur *ngxDirective
		for pos < len(toks) {
			t := toks[pos]
			pos++
			switch {
			case !t.special:
				if cur == nil {
					cur = &ngxDirective{name: t.text}
				} else {
					cur.args = append(cur.args, t.text)
				}
			case t.text == ";":
				if cur == nil {
					return fmt.Errorf("an empty directive")
				}
				parent.children = append(parent.children, cur)
				cur = nil
			case t.text == "{":
				if cur == nil {
					return fmt.Errorf("a block without a name")
				}
				cur.block = true
				if err := parse(cur, true); err != nil {
					return err
				}
				parent.children = append(parent.children, cur)
				cur = nil
			case t.text == "}":
				if !nested || cur != nil {
					return fmt.Errorf("unexpected } in %s", parent.name)
				}
				return nil
			}
		}
		if nested || cur != nil {
			return fmt.Errorf("unexpected end in %s", parent.name)
		}
		return nil
	}
	root := &ngxDirective{name: "main", block: true}
	if err := parse(root, false); err != nil {
		return nil, err
	}
	return root, nil
}

// nginxLocation returns the location of server that nginx chooses for the normalised path uri:
// an exact match (=); else the longest prefix if it is ^~; else the first regular expression
// (~, ~*) that matches, in the order of the file; else the longest prefix. nil if none.
func nginxLocation(tb testing.TB, server *ngxDirective, uri string) *ngxDirective {
	tb.Helper()
	var longest *ngxDirective
	longestLen, longestStops := -1, false
	var regexes []*ngxDirective
	for _, loc := range server.all("location") {
		mod, pattern := "", ""
		switch len(loc.args) {
		case 1:
			pattern = loc.args[0]
		case 2:
			mod, pattern = loc.args[0], loc.args[1]
		default:
			tb.Fatalf("location %q: want [modifier] pattern", loc.args)
		}
		switch mod {
		case "=":
			if uri == pattern {
				return loc
			}
		case "~", "~*":
			regexes = append(regexes, loc)
		case "", "^~":
			if strings.HasPrefix(uri, pattern) && len(pattern) > longestLen {
				longest, longestLen, longestStops = loc, len(pattern), mod == "^~"
			}
		default:
			tb.Fatalf("location %q: unknown modifier", loc.args)
		}
	}
	if longestStops {
		return longest
	}
	for _, loc := range regexes {
		expr := loc.args[1]
		if loc.args[0] == "~*" {
			expr = "(?i)" + expr
		}
		re, err := regexp.Compile(expr)
		if err != nil {
			tb.Fatalf("location %q: %v (a regular expression Go's regexp cannot check)", loc.args, err)
		}
		if re.MatchString(uri) {
			return loc
		}
	}
	return longest
}

// nginxSeconds parses an nginx time ("1h", "75s", "500ms"; a bare number is seconds).
func nginxSeconds(s string) (time.Duration, error) {
	if n, err := strconv.Atoi(s); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	return time.ParseDuration(s)
}

// effective returns the arguments of the directive name in force in a location: its own, else
// the server's, else http's (nginx's inheritance of proxy_* directives), nil if none sets it.
func effective(name string, scopes ...*ngxDirective) []string {
	for _, s := range scopes {
		if d := s.one(name); d != nil {
			return d.args
		}
	}
	return nil
}

// viewerStreams is how many viewers' event streams nginx must hold at once (issue #28).
const viewerStreams = 5000

// The kinds of location nginxLocationKind tells apart.
const (
	kindCached  = "cached"  // a public read: the micro-cache
	kindStream  = "stream"  // the event stream: unbuffered, uncached, long reads
	kindProxied = "proxied" // passed to a replica, never cached
	kindRefused = "refused" // answered by nginx itself (the public server's operations surface)
)

// checkNginxReadPath checks a rendered configuration against docs/read-path.md: the micro-cache
// on the public-read locations of both servers and nowhere else, configured as the contract
// needs (one request fills an entry, stale while updating, revalidation by ETag, the app's
// Cache-Control decides); the event stream unbuffered; enough connections for viewerStreams.
func checkNginxReadPath(t *testing.T, conf string, listen, opsListen string) {
	t.Helper()
	root, err := parseNginxConf(conf)
	if err != nil {
		t.Fatalf("parse the rendered config: %v", err)
	}
	httpBlock := root.one("http")
	if httpBlock == nil {
		t.Fatal("no http block")
	}

	// Opt-in by location: a proxy_cache in http or server would be inherited by every location
	// that does not switch it off; a proxy_cache_valid or proxy_ignore_headers would store
	// answers the app did not declare cacheable.
	var walk func(d *ngxDirective, path string)
	walk = func(d *ngxDirective, path string) {
		for _, c := range d.children {
			where := path + "/" + c.name
			switch c.name {
			case "proxy_cache":
				if d.name != "location" && !slices.Equal(c.args, []string{"off"}) {
					t.Errorf("%s %q: the cache is switched on outside a location", where, c.args)
				}
			case "proxy_cache_valid", "proxy_ignore_headers":
				t.Errorf("%s %q: the replicas' Cache-Control alone decides what is stored and for how long", where, c.args)
			}
			if c.block {
				walk(c, where)
			}
		}
	}
	walk(root, "")

	zones := map[string]bool{}
	for _, p := range httpBlock.all("proxy_cache_path") {
		if len(p.args) == 0 || !strings.HasPrefix(p.args[0], "temp/") {
			t.Errorf("proxy_cache_path %q: want it under the prefix's temp/ (the workers' own)", p.args)
		}
		for _, a := range p.args[1:] {
			if z, ok := strings.CutPrefix(a, "keys_zone="); ok {
				zones[strings.SplitN(z, ":", 2)[0]] = true
			}
		}
		for _, want := range []string{"keys_zone=", "max_size=", "inactive="} {
			if !slices.ContainsFunc(p.args, func(a string) bool { return strings.HasPrefix(a, want) }) {
				t.Errorf("proxy_cache_path %q: no %s", p.args, want)
			}
		}
	}

	servers := map[string]*ngxDirective{}
	for _, s := range httpBlock.all("server") {
		switch l := effective("listen", s); {
		case slices.Equal(l, []string{listen}):
			servers["public"] = s
		case slices.Equal(l, []string{opsListen}):
			servers["ops"] = s
		default:
			t.Errorf("a server listening on %q, neither %s nor %s", l, listen, opsListen)
		}
	}

	// Which kind of location each path lands in, on each server.
	paths := []struct{ path, public, ops string }{
		{"/api/v1/products", kindCached, kindCached},
		{"/api/v1/products/1", kindCached, kindCached},
		{"/api/v1/products/1234567", kindCached, kindCached},
		{"/api/v1/products/42/stats", kindCached, kindCached},
		{"/api/v1/strategies", kindCached, kindCached},
		{"/api/v1/events", kindStream, kindStream},
		{"/api/v1/products/1/purchase", kindProxied, kindProxied},
		{"/api/v1/products/", kindProxied, kindProxied},
		{"/api/v1/products/abc", kindProxied, kindProxied},
		{"/api/v1/products/1/stats/", kindProxied, kindProxied},
		{"/api/v1/products/1/statsx", kindProxied, kindProxied},
		{"/api/v1/productsx", kindProxied, kindProxied},
		{"/api/v1/strategies/mysql", kindProxied, kindProxied},
		{"/api/v1/events/x", kindProxied, kindProxied},
		{"/api/v1/orders/1", kindProxied, kindProxied},
		{"/api/v1/orders/1/pay", kindProxied, kindProxied},
		{"/api/v1/orders/1/cancel", kindProxied, kindProxied},
		{"/", kindProxied, kindProxied},
		{"/static/app.js", kindProxied, kindProxied},
		{"/healthz", kindProxied, kindProxied},
		{"/api/v1/admin/products", kindRefused, kindProxied},
		{"/api/v1/admin/products/1/stats", kindRefused, kindProxied},
		{"/api/v1/admin/stampedes/abc/events", kindRefused, kindProxied},
		{"/metrics", kindRefused, kindProxied},
		{"/readyz", kindRefused, kindProxied},
		{"/.seckill-error", kindRefused, kindRefused}, // nginx's own error answers
	}
	for _, name := range []string{"public", "ops"} {
		server := servers[name]
		if server == nil {
			t.Errorf("no %s server", name)
			continue
		}
		want, got := map[string]string{}, map[string]string{}
		for _, p := range paths {
			want[p.path] = p.public
			if name == "ops" {
				want[p.path] = p.ops
			}
			loc := nginxLocation(t, server, p.path)
			if loc == nil {
				got[p.path] = "no location"
				continue
			}
			got[p.path] = nginxLocationKind(t, name, loc, server, httpBlock, zones)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s server: the location of each path (-want +got):\n%s", name, diff)
		}
	}

	// Room for the streams: two connections each (the viewer's, the replica's), all of them
	// possibly on one worker, and the rest of the traffic beside.
	var conns, nofile int
	if ev := root.one("events"); ev != nil {
		if a := effective("worker_connections", ev); len(a) == 1 {
			conns, _ = strconv.Atoi(a[0])
		}
	}
	if a := effective("worker_rlimit_nofile", root); len(a) == 1 {
		nofile, _ = strconv.Atoi(a[0])
	}
	if want := 2*viewerStreams + 1024; conns < want {
		t.Errorf("worker_connections %d: %d event streams need %d and more", conns, viewerStreams, want)
	}
	if nofile < conns+1024 {
		t.Errorf("worker_rlimit_nofile %d: want worker_connections (%d) and room for cache files and logs", nofile, conns)
	}
}

// nginxLocationKind tells what loc does with a request, and checks that a cached or streaming
// location is configured as docs/read-path.md needs.
func nginxLocationKind(t *testing.T, server string, loc, srv, httpBlock *ngxDirective, zones map[string]bool) string {
	t.Helper()
	where := fmt.Sprintf("%s server, location %s", server, strings.Join(loc.args, " "))
	eff := func(name string) []string { return effective(name, loc, srv, httpBlock) }
	switch {
	case loc.one("return") != nil:
		return kindRefused
	case len(eff("proxy_cache")) > 0 && eff("proxy_cache")[0] != "off":
		if zone := eff("proxy_cache")[0]; !zones[zone] {
			t.Errorf("%s: proxy_cache %s, a zone no proxy_cache_path declares", where, zone)
		}
		key := strings.Join(eff("proxy_cache_key"), " ")
		for _, want := range [][]string{{"$request_method"}, {"$host", "$http_host"}, {"$request_uri"}} {
			if !slices.ContainsFunc(want, func(v string) bool { return strings.Contains(key, v) }) {
				t.Errorf("%s: proxy_cache_key %q has none of %v", where, key, want)
			}
		}
		for name, want := range map[string][]string{
			"proxy_cache_lock":              {"on"},
			"proxy_cache_background_update": {"on"},
			"proxy_cache_revalidate":        {"on"},
			"proxy_cache_methods":           {"GET", "HEAD"},
		} {
			if got := eff(name); !slices.Equal(got, want) {
				t.Errorf("%s: %s %q, want %q", where, name, got, want)
			}
		}
		if got := eff("proxy_cache_lock_timeout"); len(got) != 1 {
			t.Errorf("%s: no proxy_cache_lock_timeout", where)
		}
		stale := eff("proxy_cache_use_stale")
		for _, want := range []string{"updating", "error", "timeout", "http_500", "http_502", "http_503", "http_504"} {
			if !slices.Contains(stale, want) {
				t.Errorf("%s: proxy_cache_use_stale %q has no %s", where, stale, want)
			}
		}
		if !slices.ContainsFunc(loc.all("add_header"), func(d *ngxDirective) bool {
			return len(d.args) >= 2 && d.args[0] == "X-Cache-Status" && d.args[1] == "$upstream_cache_status"
		}) {
			t.Errorf("%s: no add_header X-Cache-Status $upstream_cache_status", where)
		}
		return kindCached
	case slices.Equal(eff("proxy_buffering"), []string{"off"}):
		if gz := eff("gzip"); !slices.Equal(gz, []string{"off"}) {
			t.Errorf("%s: gzip %q, want off: it would hold events back", where, gz)
		}
		rt := eff("proxy_read_timeout")
		d, err := time.Duration(0), fmt.Errorf("not set (60s)")
		if len(rt) == 1 {
			d, err = nginxSeconds(rt[0])
		}
		if err != nil || d < 10*time.Minute {
			t.Errorf("%s: proxy_read_timeout %q (%v): want a long one, a stream stays open while its viewer watches", where, rt, err)
		}
		return kindStream
	case loc.one("proxy_pass") != nil:
		return kindProxied
	}
	t.Errorf("%s: neither proxies nor answers", where)
	return "?"
}

// TestNginxConfParser: the parser and the location choice the render checks rely on.
func TestNginxConfParser(t *testing.T) {
	conf := `
# a comment { ; }
events { worker_connections 8; }
http {
    server {
        listen 1.2.3.4:80;
        location ~ ^/(a|b)(/|$) { return 404 '{"x":";"}'; }
        location = /exact { proxy_pass http://u; }
        location ^~ /static/ { proxy_pass http://u; }
        location ~* \.JS$ { proxy_pass http://u; }
        location /api/ { proxy_pass http://u; }
        location / { proxy_pass http://u; }
    }
}
`
	root, err := parseNginxConf(conf)
	if err != nil {
		t.Fatal(err)
	}
	if got := root.one("http").one("server").one("location").one("return").args; !slices.Equal(got, []string{"404", `{"x":";"}`}) {
		t.Errorf("return args %q", got)
	}
	srv := root.one("http").one("server")
	for _, tc := range []struct{ uri, want string }{
		{"/a", "~ ^/(a|b)(/|$)"},
		{"/b/c", "~ ^/(a|b)(/|$)"},
		{"/exact", "= /exact"},
		{"/exact/", "/"},
		{"/static/x.js", "^~ /static/"},
		{"/api/x.js", "~* \\.JS$"},
		{"/api/x", "/api/"},
		{"/ab", "/"},
	} {
		if got := strings.Join(nginxLocation(t, srv, tc.uri).args, " "); got != tc.want {
			t.Errorf("%s: location %q, want %q", tc.uri, got, tc.want)
		}
	}
	for _, bad := range []string{"http {", "}", "a b", "a 'b;"} {
		if _, err := parseNginxConf(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
