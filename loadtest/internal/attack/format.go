package attack

import (
	"fmt"
	"strconv"
	"strings"
)

// Seconds formats a duration of x seconds for a report, or — when it is unknown (negative).
func Seconds(x float64) string {
	if x < 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", x)
}

// Rate formats a rate for a report, or — when there was none (0).
func Rate(x float64) string {
	if x == 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f", x)
}

// Ratio formats a ratio for a report, or — when it is unknown (0).
func Ratio(x float64) string {
	if x == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", x)
}

// Share formats x of n as a percentage, or — without n.
func Share(x float64, n int) string {
	if n == 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f %%", 100*x)
}

// FormatNum prints v with at most `decimals` decimals and no trailing zeros.
func FormatNum(v float64, decimals int) string {
	s := strconv.FormatFloat(v, 'f', decimals, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if s == "-0" {
		s = "0"
	}
	return s
}
