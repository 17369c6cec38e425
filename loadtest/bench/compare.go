package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/seckill-go/seckill-go/loadtest/internal/cli"
)

// `bench compare` reads the reports of two sides — the runs of two commits that
// scripts/bench-compare.sh alternated (ABBA…), each side's reports in a directory of its own —
// and says, measurement by measurement, how far apart the sides' medians are and whether the
// difference is beyond the spread: whether every run of one side lies above every run of the
// other. On a machine whose runs move ±25–40 %, that is the question a closing note must answer
// before it quotes a gain.

// comparison is one measurement on both sides: its values (the ratio where it has one, the figure
// for a yardstick), their medians, and the verdict.
type comparison struct {
	Kind, What, Config, Unit, RatioTo string
	A, B                              []float64
	MedianA, MedianB                  float64
	// Change is (MedianB − MedianA) ÷ MedianA.
	Change float64
	// Beyond says the sides do not overlap: every value of one above every value of the other.
	// With three runs a side, two sides drawn from one distribution do so one time in ten.
	Beyond bool
}

// compareSides pairs the measurements present on both sides, in the order side A has them.
func compareSides(a, b []Row) []comparison {
	type key struct{ kind, what, config string }
	values := func(rows []Row) (map[key][]float64, []key, map[key]Row) {
		m, first := map[key][]float64{}, map[key]Row{}
		var order []key
		for _, r := range rows {
			k := key{r.Kind, r.What, r.Config}
			if _, ok := m[k]; !ok {
				order, first[k] = append(order, k), r
			}
			v := r.Figure
			if r.RatioTo != "" {
				v = r.Ratio // 0 when the round lacked its yardstick: left out below
			}
			if v > 0 {
				m[k] = append(m[k], v)
			} else if _, ok := m[k]; !ok {
				m[k] = nil
			}
		}
		return m, order, first
	}
	va, order, first := values(a)
	vb, _, _ := values(b)
	var out []comparison
	for _, k := range order {
		xs, ys := va[k], vb[k]
		if len(xs) == 0 || len(ys) == 0 {
			continue
		}
		c := comparison{Kind: k.kind, What: k.what, Config: k.config, Unit: first[k].Unit, RatioTo: first[k].RatioTo,
			A: xs, B: ys, MedianA: median(xs), MedianB: median(ys)}
		c.Change = (c.MedianB - c.MedianA) / c.MedianA
		c.Beyond = len(xs) >= 2 && len(ys) >= 2 && (slices.Max(xs) < slices.Min(ys) || slices.Max(ys) < slices.Min(xs))
		out = append(out, c)
	}
	return out
}

// compareMarkdown renders the comparison of side A (labelA) and side B (labelB).
func compareMarkdown(labelA, labelB string, runsA, runsB int, cs []comparison) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## seckill-go bench compare: %s → %s\n\n", labelA, labelB)
	fmt.Fprintf(&b, "%d runs of A, %d of B, alternated. A value is a ratio to its own round's yardstick (a yardstick's own figure for the yardsticks). "+
		"Beyond the spread: every run of one side lies above every run of the other.\n\n", runsA, runsB)
	b.WriteString("| what | configuration | A (median) | B (median) | change | A runs | B runs | verdict |\n|---|---|---:|---:|---:|---|---|---|\n")
	for _, c := range cs {
		unit := c.Unit
		if c.RatioTo != "" {
			unit = "of " + c.RatioTo
		}
		verdict := "within the spread"
		if c.Beyond {
			verdict = "**beyond the spread**"
		}
		fmt.Fprintf(&b, "| %s | %s | %s %s | %s | %+.1f %% | %s | %s | %s |\n", c.What, c.Config, value(c.MedianA), unit, value(c.MedianB), 100*c.Change, values(c.A), values(c.B), verdict)
	}
	return b.String()
}

func value(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func values(vs []float64) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = value(v)
	}
	return strings.Join(s, ", ")
}

// loadSide reads every bench-*.json report in dir.
func loadSide(dir string) ([]*Report, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "bench-*.json"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no bench-*.json report in %s", dir)
	}
	var out []*Report
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var r Report
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		out = append(out, &r)
	}
	return out, nil
}

func rowsOf(reps []*Report) []Row {
	var rows []Row
	for _, r := range reps {
		rows = append(rows, r.Rows...)
	}
	return rows
}

// runCompare is `bench compare -a DIR -b DIR`: it prints the comparison and, with -out, writes it.
func runCompare(args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("bench compare", stderr)
	dirA := fs.String("a", "", "directory of side A's bench reports (bench-*.json)")
	dirB := fs.String("b", "", "directory of side B's bench reports")
	labelA := fs.String("a-label", "A", "what side A is (a commit)")
	labelB := fs.String("b-label", "B", "what side B is")
	out := fs.String("out", "", "directory to write the comparison to (bench-compare-<time>.md and .json); empty: print only")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if *dirA == "" || *dirB == "" {
		return errors.New("bench compare: -a and -b are required")
	}
	a, err := loadSide(*dirA)
	if err != nil {
		return err
	}
	b, err := loadSide(*dirB)
	if err != nil {
		return err
	}
	cs := compareSides(rowsOf(a), rowsOf(b))
	md := compareMarkdown(*labelA, *labelB, len(a), len(b), cs)
	fmt.Fprint(stdout, md)
	if *out == "" {
		return nil
	}
	files, err := cli.WriteReport(*out, "bench-compare-"+time.Now().UTC().Format("20060102-150405"),
		map[string]any{"a": *labelA, "b": *labelB, "measurements": cs}, cli.Text{Ext: ".md", Body: md})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nreport: %s\n", strings.Join(files, ", "))
	return nil
}
