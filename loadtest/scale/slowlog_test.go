package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A slow log as MariaDB 10.11 writes it with log_slow_verbosity 'query_plan,explain'.
const sampleLog = `/usr/sbin/mariadbd, Version: 10.11.19-MariaDB-0+deb12u1 (Debian 12). started with:
Tcp port: 3306  Unix socket: /run/mysqld/mysqld.sock
Time		    Id Command	Argument
# Time: 261129 14:32:16
# User@Host: root[root] @  [127.0.0.1]
# Thread_id: 341  Schema: seckill_scale  QC_hit: No
# Query_time: 0.000057  Lock_time: 0.000000  Rows_sent: 1  Rows_examined: 0
# Rows_affected: 0  Bytes_sent: 80
#
# explain: id	select_type	table	type	possible_keys	key	key_len	ref	rows	r_rows	filtered	r_filtered	Extra
# explain: 1	SIMPLE	NULL	NULL	NULL	NULL	NULL	NULL	NULL	NULL	NULL	NULL	No tables used
#
use ` + "`seckill_scale`" + `;
SET timestamp=1795962736;
SELECT 'scale-op|20000|buyer reads an order';
# User@Host: root[root] @  [127.0.0.1]
# Thread_id: 341  Schema: seckill_scale  QC_hit: No
# Query_time: 0.002990  Lock_time: 0.002662  Rows_sent: 1  Rows_examined: 4
# Rows_affected: 0  Bytes_sent: 65
# Full_scan: Yes  Full_join: No  Tmp_table: No  Tmp_table_on_disk: No
#
# explain: id	select_type	table	type	possible_keys	key	key_len	ref	rows	r_rows	filtered	r_filtered	Extra
# explain: 1	SIMPLE	orders	index	NULL	PRIMARY	8	NULL	4	4.00	100.00	50.00	Using where
#
SET timestamp=1795962736;
SELECT o.order_id FROM orders o
WHERE o.order_id = 'a-1' AND o.user_id = 'u'
# User@Host: root[root] @  [127.0.0.1]
# Thread_id: 12  Schema: seckill  QC_hit: No
# Query_time: 11.2  Lock_time: 0.000181  Rows_sent: 0  Rows_examined: 9
SET timestamp=1795962736;
SELECT SLEEP(11);
`

func TestParseSlowLog(t *testing.T) {
	all, err := parseSlowLog(strings.NewReader(sampleLog))
	if err != nil {
		t.Fatal(err)
	}
	want := []entry{
		{thread: 341, schema: "seckill_scale", explain: []string{"1\tSIMPLE\tNULL\tNULL\tNULL\tNULL\tNULL\tNULL\tNULL\tNULL\tNULL\tNULL\tNo tables used"},
			query: "SELECT 'scale-op|20000|buyer reads an order'"},
		{thread: 341, schema: "seckill_scale", rowsExamined: 4, fullScan: true,
			explain: []string{"1\tSIMPLE\torders\tindex\tNULL\tPRIMARY\t8\tNULL\t4\t4.00\t100.00\t50.00\tUsing where"},
			query:   "SELECT o.order_id FROM orders o\nWHERE o.order_id = 'a-1' AND o.user_id = 'u'"},
		{thread: 12, schema: "seckill", rowsExamined: 9, query: "SELECT SLEEP(11)"},
	}
	if diff := cmp.Diff(want, all, cmp.AllowUnexported(entry{})); diff != "" {
		t.Fatalf("entries (-want +got):\n%s", diff)
	}
}

// TestAttribute: the statements between an op's marker and the end marker are its calls', at
// the marker's volume; what runs outside the markers is nobody's.
func TestAttribute(t *testing.T) {
	q := func(s string, examined int) entry { return entry{query: s, rowsExamined: examined} }
	r := &dataReport{Reps: 2, Volumes: []int{0, 100}, Ops: []*opRow{{Name: "read", Points: []point{{Volume: 0}, {Volume: 100}}}}}
	err := r.attribute([]entry{
		q("INSERT INTO products VALUES (1)", 1000), // the live sale's creation: outside
		q("SELECT '"+marker("read", 0)+"'", 0), q("SELECT * FROM t WHERE id = 1", 1), q("SELECT * FROM t WHERE id = 2", 1), q("SELECT '"+markerEnd+"'", 0),
		q("UPDATE x SET a = 1", 500),
		q("SELECT '"+marker("read", 100)+"'", 0), q("SELECT * FROM t WHERE id = 3", 40), q("SELECT * FROM t WHERE id = 4", 60), q("SELECT '"+markerEnd+"'", 0),
	})
	if err != nil {
		t.Fatal(err)
	}
	o := r.Ops[0]
	if got := []float64{o.Points[0].Examined, o.Points[1].Examined}; !cmp.Equal(got, []float64{1, 50}) {
		t.Errorf("rows examined per call %v, want [1 50]", got)
	}
	if got := []float64{o.Points[0].Statements, o.Points[1].Statements}; !cmp.Equal(got, []float64{1, 1}) {
		t.Errorf("statements per call %v, want [1 1]", got)
	}
	if len(o.Plans) != 1 || o.Plans[0].Query != "SELECT * FROM t WHERE id = ?" {
		t.Errorf("plans %+v, want the one shape", o.Plans)
	}
	if g := o.growth(); g != "grows ×50" {
		t.Errorf("growth %q, want grows ×50", g)
	}
	r.Ops = append(r.Ops, &opRow{Name: "missing", Points: []point{{Volume: 0}}})
	if err := r.attribute(nil); err == nil {
		t.Error("an op without statements in the log: no error")
	}
}

func TestShape(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"SELECT a FROM t WHERE id = 42 AND name = 'x\\'y' AND f = 1.5", "SELECT a FROM t WHERE id = ? AND name = ? AND f = ?"},
		{"SELECT a FROM t WHERE id IN (1,2, 3)", "SELECT a FROM t WHERE id IN (?…)"},
		{"SELECT a\n  FROM t4", "SELECT a FROM t4"},
		{"(SELECT a FROM t WHERE id = 1 LIMIT 1) UNION ALL (SELECT a FROM t WHERE id = 2 LIMIT 1)", "(SELECT a FROM t WHERE id = ? LIMIT ?) UNION ALL … (that part for each of a list)"},
		{"(SELECT a FROM t) UNION ALL (SELECT b FROM u)", "(SELECT a FROM t) UNION ALL (SELECT b FROM u)"},
	} {
		if got := shape(tc.in); got != tc.want {
			t.Errorf("shape(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestParseOptions(t *testing.T) {
	env := func(string) string { return "" }
	o, err := parseOptions([]string{"-rows", "0,1_000_000,10000000"}, env, &strings.Builder{})
	if err != nil || !cmp.Equal(o.rows, []int{0, 1_000_000, 10_000_000}) {
		t.Fatalf("rows %v, %v", o.rows, err)
	}
	for _, bad := range [][]string{{"-rows", "100,10"}, {"-rows", "x"}, {"-rows", ""}, {"-reps", "0"}, {"-db", "a;b"}} {
		if _, err := parseOptions(bad, env, &strings.Builder{}); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

func TestMarkdownTables(t *testing.T) {
	r := &dataReport{Reps: 1, Sales: 100, Volumes: []int{0, 1_000_000}, FillSeconds: []float64{0, 80},
		Ops: []*opRow{{Name: "read", Runs: "per request", Points: []point{{Volume: 0, Examined: 1, MedianUS: 10, P90US: 20}, {Volume: 1_000_000, Examined: 1, MedianUS: 12, P90US: 30}}}}}
	md := (&runReport{Data: r}).markdown()
	for _, want := range []string{
		"| operation | runs | 0 rows | 1M rows | verdict |\n|---|---|---:|---:|---|\n| read | per request | 1 | 1 | flat |\n",
		"| operation | 0 rows | 1M rows |\n|---|---:|---:|\n| read | 10 (20) | 12 (30) |\n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks\n%s\nin\n%s", want, md)
		}
	}
}
