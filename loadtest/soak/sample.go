package main

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// A gauge is one of the figures the soak follows over time, for each replica and for MySQL.
type gauge string

const (
	heap       gauge = "heap"       // go_memstats_heap_inuse_bytes: the live heap and its fragmentation
	goroutines gauge = "goroutines" // go_goroutines
	openFiles  gauge = "open_files" // process_open_fds: sockets included
	dbConns    gauge = "db_conns"   // go_sql_open_connections: the replica's pool to MySQL
	// mysqlThreads is MySQL's Threads_connected: every client's connections, the soak's own included.
	mysqlThreads gauge = "mysql_threads"
)

// replicaGauges are what each replica's /metrics gives, and the series that carries each.
var replicaGauges = []struct {
	g      gauge
	series string
}{
	{heap, "go_memstats_heap_inuse_bytes"},
	{goroutines, "go_goroutines"},
	{openFiles, "process_open_fds"},
	{dbConns, "go_sql_open_connections"},
}

// A sample is every gauge of one source (a replica's URL, or "mysql") at one moment.
type sample struct {
	At     time.Time
	Source string
	Values map[gauge]float64
}

// parseGauges reads the Prometheus text exposition in r and returns the replica gauges it holds.
// A series with labels counts when its name matches (go_sql_open_connections carries db_name);
// several series of one name are summed. Lines it does not know are skipped.
func parseGauges(r io.Reader) (map[gauge]float64, error) {
	want := map[string]gauge{}
	for _, rg := range replicaGauges {
		want[rg.series] = rg.g
	}
	out := map[gauge]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, ok := strings.Cut(line, " ")
		if i := strings.IndexByte(name, '{'); i >= 0 {
			// Labels may hold spaces: the value follows the closing brace.
			j := strings.LastIndexByte(line, '}')
			if j < 0 {
				continue
			}
			name, rest, ok = line[:i], strings.TrimSpace(line[j+1:]), true
		}
		g, known := want[name]
		if !ok || !known {
			continue
		}
		value, _, _ := strings.Cut(strings.TrimSpace(rest), " ") // a timestamp may follow
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return nil, fmt.Errorf("metric %s: value %q: %w", name, value, err)
		}
		out[g] += v
	}
	return out, sc.Err()
}

// sampler reads the gauges of every replica and of MySQL.
type sampler struct {
	replicas []string
	db       *sql.DB
	http     *http.Client
}

// take returns one sample per replica and one of MySQL, all at now; a replica that does not
// answer is an error, for a soak must not go on blind.
func (s *sampler) take(ctx context.Context, now time.Time) ([]sample, error) {
	out := make([]sample, 0, len(s.replicas)+1)
	for _, base := range s.replicas {
		v, err := s.replica(ctx, base)
		if err != nil {
			return nil, fmt.Errorf("metrics of %s: %w", base, err)
		}
		out = append(out, sample{At: now, Source: base, Values: v})
	}
	var name string
	var threads float64
	if err := s.db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Threads_connected'").Scan(&name, &threads); err != nil {
		return nil, fmt.Errorf("MySQL's Threads_connected: %w", err)
	}
	return append(out, sample{At: now, Source: "mysql", Values: map[gauge]float64{mysqlThreads: threads}}), nil
}

func (s *sampler) replica(ctx context.Context, base string) (map[gauge]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	res, err := s.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d", res.StatusCode)
	}
	v, err := parseGauges(res.Body)
	if err != nil {
		return nil, err
	}
	for _, rg := range replicaGauges {
		if _, ok := v[rg.g]; !ok {
			return nil, fmt.Errorf("no %s", rg.series)
		}
	}
	return v, nil
}
