package deploy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A small PromQL reader for the dashboard test: it finds the metric selectors (with their label
// matchers) and the grouping labels of an expression, and refuses unknown functions and
// unbalanced brackets. It does not evaluate or fully validate PromQL: promtool does that when it
// is installed (dashboard_test.go).

type matcher struct{ label, op, value string }

type selector struct {
	metric   string
	matchers []matcher
}

type promqlRefs struct {
	selectors []selector
	grouping  []string // labels of by/without/on/ignoring/group_left/group_right
}

type token struct {
	kind string // ident, string, number, macro, punct
	text string
}

// promqlFuncs are PromQL's functions and aggregation operators (Prometheus 3).
var promqlFuncs = wordSet(`abs absent absent_over_time acos acosh asin asinh atan atanh avg_over_time ceil
		changes clamp clamp_max clamp_min cos cosh count_over_time days_in_month day_of_month day_of_week
		day_of_year deg delta deriv double_exponential_smoothing exp floor histogram_avg histogram_count
		histogram_fraction histogram_quantile histogram_stddev histogram_stdvar histogram_sum holt_winters hour
		idelta increase irate label_join label_replace last_over_time ln log10 log2 mad_over_time max_over_time
		min_over_time minute month pi predict_linear present_over_time quantile_over_time rad rate resets round
		scalar sgn sin sinh sort sort_by_label sort_by_label_desc sort_desc sqrt stddev_over_time
		stdvar_over_time sum_over_time tan tanh time timestamp vector year
		sum min max avg group stddev stdvar count count_values bottomk topk quantile limitk limit_ratio`)

func wordSet(words string) map[string]bool {
	set := map[string]bool{}
	for _, w := range strings.Fields(words) {
		set[w] = true
	}
	return set
}

var (
	groupingKeywords = wordSet("by without on ignoring group_left group_right")
	otherKeywords    = wordSet("bool and or unless offset atan2 inf nan")
)

func tokenize(expr string) ([]token, error) {
	var toks []token
	isIdent := func(c byte, first bool) bool {
		return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || !first && c >= '0' && c <= '9'
	}
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '"' || c == '\'' || c == '`':
			j := i + 1
			for j < len(expr) && expr[j] != c {
				if expr[j] == '\\' && c != '`' {
					j++
				}
				j++
			}
			if j >= len(expr) {
				return nil, fmt.Errorf("unterminated string at %d", i)
			}
			toks = append(toks, token{"string", expr[i+1 : j]})
			i = j + 1
		case c == '$':
			j := i + 1
			for j < len(expr) && (isIdent(expr[j], false) || expr[j] == '{' || expr[j] == '}') {
				j++
			}
			toks = append(toks, token{"macro", expr[i:j]})
			i = j
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(expr) && expr[i+1] >= '0' && expr[i+1] <= '9':
			j := i
			for j < len(expr) && (expr[j] == '.' || isIdent(expr[j], false)) {
				j++ // 0.99, 1e3, and durations such as 5m or 1h30m
			}
			toks = append(toks, token{"number", expr[i:j]})
			i = j
		case isIdent(c, true):
			j := i
			for j < len(expr) && isIdent(expr[j], false) {
				j++
			}
			toks = append(toks, token{"ident", expr[i:j]})
			i = j
		default:
			op := string(c)
			if i+1 < len(expr) {
				if two := expr[i : i+2]; two == "!=" || two == "=~" || two == "!~" || two == "==" || two == ">=" || two == "<=" {
					op = two
				}
			}
			if !strings.Contains("(){}[],=!~+-*/%^<>:@", op[:1]) {
				return nil, fmt.Errorf("unexpected %q at %d", c, i)
			}
			toks = append(toks, token{"punct", op})
			i += len(op)
		}
	}
	return toks, nil
}

func parsePromQL(expr string) (promqlRefs, error) {
	var refs promqlRefs
	toks, err := tokenize(expr)
	if err != nil {
		return refs, err
	}
	var stack []string
	closer := map[string]string{"(": ")", "[": "]", "{": "}"}
	peek := func(i int) token {
		if i < len(toks) {
			return toks[i]
		}
		return token{}
	}
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		switch {
		case t.kind == "punct" && (t.text == "(" || t.text == "["):
			stack = append(stack, closer[t.text])
		case t.kind == "punct" && (t.text == ")" || t.text == "]"):
			if len(stack) == 0 || stack[len(stack)-1] != t.text {
				return refs, fmt.Errorf("unbalanced %q", t.text)
			}
			stack = stack[:len(stack)-1]
		case t.kind == "punct" && t.text == "{":
			return refs, fmt.Errorf("a selector without a metric name ({...} at token %d)", i)
		case t.kind != "ident":
		case groupingKeywords[t.text]:
			if peek(i+1).text != "(" {
				if t.text == "group_left" || t.text == "group_right" {
					continue
				}
				return refs, fmt.Errorf("%s without a label list", t.text)
			}
			j := i + 2
			for ; j < len(toks) && toks[j].text != ")"; j++ {
				switch {
				case toks[j].kind == "ident":
					refs.grouping = append(refs.grouping, toks[j].text)
				case toks[j].text != ",":
					return refs, fmt.Errorf("%s (...): unexpected %q", t.text, toks[j].text)
				}
			}
			if j == len(toks) {
				return refs, fmt.Errorf("%s (: unterminated", t.text)
			}
			i = j
		case otherKeywords[t.text]:
		case peek(i+1).text == "(" || groupingKeywords[peek(i+1).text]:
			if !promqlFuncs[t.text] {
				return refs, fmt.Errorf("unknown function %s", t.text)
			}
		default:
			sel := selector{metric: t.text}
			if peek(i+1).text == "{" {
				j := i + 2
				for ; j < len(toks) && toks[j].text != "}"; j++ {
					if toks[j].text == "," {
						continue
					}
					if j+2 >= len(toks) || toks[j].kind != "ident" || toks[j+2].kind != "string" {
						return refs, fmt.Errorf("%s{...}: want label op \"value\"", t.text)
					}
					op := toks[j+1].text
					if op != "=" && op != "!=" && op != "=~" && op != "!~" {
						return refs, fmt.Errorf("%s{...}: operator %q", t.text, op)
					}
					sel.matchers = append(sel.matchers, matcher{toks[j].text, op, toks[j+2].text})
					j += 2
				}
				if j == len(toks) {
					return refs, fmt.Errorf("%s{: unterminated", t.text)
				}
				i = j
			}
			refs.selectors = append(refs.selectors, sel)
		}
	}
	if len(stack) > 0 {
		return refs, fmt.Errorf("unclosed %q", stack[len(stack)-1])
	}
	return refs, nil
}

func TestParsePromQL(t *testing.T) {
	for _, tc := range []struct {
		expr, wantErr string
		want          promqlRefs
	}{
		{
			expr: `sum by (strategy, outcome) (rate(seckill_purchases_total[$__rate_interval]))`,
			want: promqlRefs{selectors: []selector{{metric: "seckill_purchases_total"}}, grouping: []string{"strategy", "outcome"}},
		},
		{
			expr: `histogram_quantile(0.99, sum by (le, strategy) (rate(seckill_purchase_duration_seconds_bucket{outcome="accepted"}[5m])))`,
			want: promqlRefs{
				selectors: []selector{{metric: "seckill_purchase_duration_seconds_bucket", matchers: []matcher{{"outcome", "=", "accepted"}}}},
				grouping:  []string{"le", "strategy"},
			},
		},
		{
			expr: `max by (product_id) (a) - on (product_id) group_left b{x!~"y|z", w="1"} offset 5m > bool 0`,
			want: promqlRefs{
				selectors: []selector{{metric: "a"}, {metric: "b", matchers: []matcher{{"x", "!~", "y|z"}, {"w", "=", "1"}}}},
				grouping:  []string{"product_id", "product_id"},
			},
		},
		{
			expr: `sum(rate(x_sum[1h30m])) / sum without (instance) (rate(x_count[$__range]))`,
			want: promqlRefs{selectors: []selector{{metric: "x_sum"}, {metric: "x_count"}}, grouping: []string{"instance"}},
		},
		{expr: `histogramquantile(0.9, x)`, wantErr: "unknown function"},
		{expr: `sum(rate(x[5m])`, wantErr: "unclosed"},
		{expr: `sum(x))`, wantErr: "unbalanced"},
		{expr: `x{a="b"`, wantErr: "unterminated"},
		{expr: `x{a=b}`, wantErr: "want label op"},
		{expr: `{__name__="x"}`, wantErr: "without a metric name"},
		{expr: `sum by x (y)`, wantErr: "without a label list"},
	} {
		got, err := parsePromQL(tc.expr)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parsePromQL(%q) error = %v, want %q", tc.expr, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("parsePromQL(%q): %v", tc.expr, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(promqlRefs{}, selector{}, matcher{})); diff != "" {
			t.Errorf("parsePromQL(%q) (-want +got):\n%s", tc.expr, diff)
		}
	}
}
