package zoo

import (
	"fmt"
	"html/template"
	"strings"

	"github.com/seckill-go/seckill-go/loadtest/internal/attack"
	"github.com/seckill-go/seckill-go/loadtest/internal/cli"
)

// Markdown renders the matrix: one line per strategy, then the numbers behind each cell.
func Markdown(r *ZooReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## seckill-go lock zoo %s\n\n", r.RunID)
	fmt.Fprintf(&b, "%s · %s · took %.0f s · targets %s\n\n", r.Machine, r.StartedAt.Format("2006-01-02 15:04 UTC"), r.Took, strings.Join(r.Targets, ", "))
	s := r.Settings
	fmt.Fprintf(&b, "load: %d units, %d buyers × 3 tries, %d workers, as fast as they go", s.Stock, s.Buyers, s.Workers)
	if len(s.Faults) == 0 {
		b.WriteString(" · faults: none played (-zoo-faults)\n\n")
	} else {
		fmt.Fprintf(&b, " · faults (%s): a step of %s at %d req/s per strategy, the fault %s in; "+
			"pause = the lock holder's process stopped %s (lock TTL %s, ZooKeeper session %s); kill = SIGKILLed and restarted\n\n",
			strings.Join(s.Faults, ", "), s.Step, s.StepRate, s.FaultAfter, s.Pause, s.LockTTL, s.ZKSession)
	}
	if y := r.Yardsticks; y != nil {
		fmt.Fprintf(&b, "R (one hot row's conditional UPDATE, autocommit, without the app): %s rows/s · bare gin: %s req/s\n\n",
			attack.Rate(y.R.RowsPerSec), attack.Rate(y.BareGin.RequestsPerSec))
	}
	b.WriteString("| strategy | safe? | load | accepted/s | ÷ R | lock wait p50 / p99 ms | wasted tries per grant | wake-ups per grant | pause | kill | restart |\n")
	b.WriteString("|---|---|---|---:|---:|---:|---:|---:|---|---|---|\n")
	for _, row := range r.Rows {
		safe := "yes"
		if !row.Safe {
			safe = "**unsafe**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", row.Strategy, safe, cellWord(row.Load),
			attack.Rate(row.AcceptedPerSec), attack.Ratio(row.AcceptedPerR), waits(row), perGrant(row.WastedPerGrant), perGrant(row.WakeupsPerGrant),
			faultWord(row, "pause"), faultWord(row, "kill"), faultWord(row, "restart"))
	}
	b.WriteString("\n✓: what the write-ups say happens, happened; ✗: it did not (the expected outcome in brackets).\n\nWhat each cell saw:\n\n")
	for _, row := range r.Rows {
		fmt.Fprintf(&b, "- **%s** — %s\n", row.Strategy, row.Summary)
		fmt.Fprintf(&b, "  - load: %s — %s\n", row.Load.Outcome, row.Load.Detail)
		for _, name := range zooFaults {
			if c, ok := row.Faults[name]; ok {
				fmt.Fprintf(&b, "  - %s: %s — %s\n", name, c.Outcome, c.Detail)
			}
		}
		for _, c := range append([]ZooCell{row.Load}, faultCells(row)...) {
			for _, v := range c.Violations {
				fmt.Fprintf(&b, "    - %s\n", v)
			}
		}
	}
	verdict := "every cell is what the write-ups say"
	if !r.Passed {
		verdict = "SOME CELLS ARE NOT WHAT THE WRITE-UPS SAY (✗)"
	}
	fmt.Fprintf(&b, "\nVerdict: %s.\n", verdict)
	return b.String()
}

func faultCells(row ZooRow) []ZooCell {
	var out []ZooCell
	for _, name := range zooFaults {
		if c, ok := row.Faults[name]; ok {
			out = append(out, c)
		}
	}
	return out
}

func cellWord(c ZooCell) string {
	if c.ok() {
		return "✓ " + c.Outcome
	}
	return fmt.Sprintf("✗ %s (%s)", c.Outcome, c.Expected)
}

func faultWord(row ZooRow, name string) string {
	c, ok := row.Faults[name]
	if !ok {
		return "—"
	}
	return cellWord(c)
}

func waits(row ZooRow) string {
	if row.LockWaitP50 == 0 && row.LockWaitP99 == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f / %.1f", row.LockWaitP50, row.LockWaitP99)
}

func perGrant(x float64) string {
	if x < 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", x)
}

// WriteReport writes results/zoo-<run>.md, .html and .json and returns their paths.
func WriteReport(dir string, r *ZooReport) ([]string, error) {
	var page strings.Builder
	if err := zooPage.Execute(&page, zooPageView(r)); err != nil {
		return nil, err
	}
	return attack.WriteFiles(dir, "zoo-"+r.RunID, r, cli.Text{Ext: ".md", Body: Markdown(r)}, cli.Text{Ext: ".html", Body: page.String()})
}

type zooCellView struct {
	Text, Class, Detail string
}

type zooRowView struct {
	Strategy, Family, Summary, Safe, Accepted, Ratio, Waits, Wasted, Wakeups string
	Unsafe                                                                   bool
	Cells                                                                    []zooCellView
}

func zooCellOf(c ZooCell, applies bool) zooCellView {
	if !applies {
		return zooCellView{Text: "—", Class: "na"}
	}
	class := "ok"
	if !c.ok() {
		class = "bad"
	} else if c.Outcome != outcomePass {
		class = "shown" // the failure the write-ups warn about, shown as it should be
	}
	return zooCellView{Text: cellWord(c), Class: class, Detail: c.Detail}
}

func zooPageView(r *ZooReport) map[string]any {
	var rows []zooRowView
	for _, row := range r.Rows {
		v := zooRowView{Strategy: row.Strategy, Family: row.Family, Summary: row.Summary, Safe: "yes", Unsafe: !row.Safe,
			Accepted: attack.Rate(row.AcceptedPerSec), Ratio: attack.Ratio(row.AcceptedPerR), Waits: waits(row),
			Wasted: perGrant(row.WastedPerGrant), Wakeups: perGrant(row.WakeupsPerGrant)}
		if !row.Safe {
			v.Safe = "unsafe"
		}
		v.Cells = append(v.Cells, zooCellOf(row.Load, true))
		for _, name := range zooFaults {
			c, ok := row.Faults[name]
			v.Cells = append(v.Cells, zooCellOf(c, ok))
		}
		rows = append(rows, v)
	}
	return map[string]any{"R": r, "Rows": rows, "Markdown": Markdown(r)}
}

var zooPage = template.Must(template.New("zoo").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>seckill-go lock zoo {{.R.RunID}}</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:2rem;color:#1d1d1f;background:#fafafa}
table{border-collapse:collapse;background:#fff}th,td{border:1px solid #ddd;padding:.35rem .55rem;vertical-align:top}
th{background:#f0f0f3;text-align:left}td.num{text-align:right;font-variant-numeric:tabular-nums}
td.ok{background:#e9f7ee}td.shown{background:#fff4d6}td.bad{background:#fde2e1;font-weight:600}td.na{color:#999}
tr.unsafe td:first-child::after{content:" · unsafe";color:#b3261e;font-size:.85em}
small{color:#555;display:block;max-width:22rem}pre{white-space:pre-wrap;background:#fff;border:1px solid #ddd;padding:1rem}
</style></head><body>
<h1>seckill-go lock zoo <small>{{.R.RunID}} · {{.R.Machine}}</small></h1>
{{with .R.Yardsticks}}<p>R, one hot row's conditional UPDATE without the app: <b>{{printf "%.0f" .R.RowsPerSec}} rows/s</b>.</p>{{end}}
<p>Green: safe and whole. Yellow: the failure the write-ups warn about, shown as they say. Red: not what they say.</p>
<table><thead><tr><th>strategy</th><th>family</th><th>accepted/s</th><th>÷ R</th><th>lock wait p50 / p99 ms</th><th>wasted tries per grant</th><th>wake-ups per grant</th><th>load</th><th>pause</th><th>kill</th><th>restart</th></tr></thead>
<tbody>{{range .Rows}}<tr{{if .Unsafe}} class="unsafe"{{end}}><td><b>{{.Strategy}}</b><small>{{.Summary}}</small></td><td>{{.Family}}</td>
<td class="num">{{.Accepted}}</td><td class="num">{{.Ratio}}</td><td class="num">{{.Waits}}</td><td class="num">{{.Wasted}}</td><td class="num">{{.Wakeups}}</td>
{{range .Cells}}<td class="{{.Class}}">{{.Text}}{{if .Detail}}<small>{{.Detail}}</small>{{end}}</td>{{end}}</tr>
{{end}}</tbody></table>
<h2>The report as Markdown</h2><pre>{{.Markdown}}</pre>
</body></html>
`))
