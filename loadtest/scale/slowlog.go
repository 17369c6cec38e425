package main

import (
	"bufio"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// entry is one statement of MariaDB's slow log.
type entry struct {
	thread       int
	schema       string
	rowsExamined int
	fullScan     bool
	// explain is the plan's rows, the header dropped: id, select_type, table, type,
	// possible_keys, key, key_len, ref, rows, r_rows, filtered, r_filtered, Extra (tab-separated).
	explain []string
	query   string
}

// readSlowLog reads the slow log at path and returns the statements run on database db, in the
// order they ended.
func readSlowLog(path, db string) ([]entry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	all, err := parseSlowLog(f)
	if err != nil {
		return nil, err
	}
	var out []entry
	for _, e := range all {
		if e.schema == db {
			out = append(out, e)
		}
	}
	return out, nil
}

var (
	threadRE   = regexp.MustCompile(`^# Thread_id: (\d+)\s+Schema: (\S*)`)
	examinedRE = regexp.MustCompile(`Rows_examined: (\d+)`)
)

// parseSlowLog splits a slow log into its entries: each starts at a "# User@Host:" line; its
// header lines start with "#", and the statement follows, after a "SET timestamp" (and a "use")
// line, until the next entry.
func parseSlowLog(r io.Reader) ([]entry, error) {
	var out []entry
	var cur *entry
	var query []string
	flush := func() {
		if cur != nil {
			cur.query = strings.TrimSuffix(strings.TrimSpace(strings.Join(query, "\n")), ";")
			out = append(out, *cur)
		}
		cur, query = nil, nil
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "# User@Host:"):
			flush()
			cur = &entry{}
		case cur == nil:
		case strings.HasPrefix(line, "# Thread_id:"):
			if m := threadRE.FindStringSubmatch(line); m != nil {
				cur.thread, _ = strconv.Atoi(m[1])
				cur.schema = m[2]
			}
		case strings.HasPrefix(line, "# Query_time:"):
			if m := examinedRE.FindStringSubmatch(line); m != nil {
				cur.rowsExamined, _ = strconv.Atoi(m[1])
			}
		case strings.HasPrefix(line, "# Full_scan: Yes"):
			cur.fullScan = true
		case strings.HasPrefix(line, "# explain: "):
			row := strings.TrimPrefix(line, "# explain: ")
			if !strings.HasPrefix(row, "id\t") {
				cur.explain = append(cur.explain, row)
			}
		case strings.HasPrefix(line, "# Time:"), strings.HasPrefix(line, "#"):
		case len(query) == 0 && (strings.HasPrefix(line, "SET timestamp=") || strings.HasPrefix(line, "use ")):
		default:
			query = append(query, line)
		}
	}
	flush()
	return out, sc.Err()
}

var literalRE = regexp.MustCompile(`'(?:[^'\\]|\\.)*'|\b\d+(?:\.\d+)?\b`)

var listRE = regexp.MustCompile(`\(\?(?:, ?\?)+\)`)

// shape is a statement with its literals replaced by ?, a list of them by (?…), its spaces
// squeezed and a run of one UNION ALL part written once with its count: the statements of an op
// that differ only in their values, or in how many products they name, are one shape.
func shape(q string) string {
	q = strings.Join(strings.Fields(literalRE.ReplaceAllString(q, "?")), " ")
	q = listRE.ReplaceAllString(q, "(?…)")
	parts := strings.Split(q, " UNION ALL ")
	if len(parts) > 1 && parts[0] == parts[len(parts)-1] && len(slices.Compact(slices.Clone(parts))) == 1 {
		return parts[0] + " UNION ALL … (that part for each of a list)"
	}
	return q
}

// planRows drops repeated rows of a plan (a UNION's parts: the same access but for its id and
// select_type), keeping the first of each.
func planRows(explain []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, row := range explain {
		f := strings.SplitN(row, "\t", 3)
		key := row
		if len(f) == 3 {
			key = f[2]
		}
		if !seen[key] {
			seen[key] = true
			out = append(out, row)
		}
	}
	return out
}
