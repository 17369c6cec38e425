package store

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestShortStatement: a traced statement is kept whole up to traceStatementMax bytes, and cut
// there otherwise, on a rune's start, with "…".
func TestShortStatement(t *testing.T) {
	short := "SELECT 1"
	if got := shortStatement(short); got != short {
		t.Errorf("shortStatement(%q) = %q", short, got)
	}
	long := "INSERT INTO reservations VALUES " + strings.Repeat("(?,?,?),", 200)
	got := shortStatement(long)
	if !strings.HasSuffix(got, "…") || len(got) != traceStatementMax+len("…") || !strings.HasPrefix(long, strings.TrimSuffix(got, "…")) {
		t.Errorf("shortStatement of %d bytes = %q (%d bytes)", len(long), got, len(got))
	}
	runes := strings.Repeat("é", traceStatementMax) // 2 bytes each: byte traceStatementMax is a rune's start
	if got := shortStatement("x" + runes); !utf8.ValidString(got) || len(got) > traceStatementMax+len("…") {
		t.Errorf("cut inside a rune: %q", got)
	}
}
