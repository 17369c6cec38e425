package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestExitStatus(t *testing.T) {
	for _, tc := range []struct {
		name       string
		err        error
		want       int
		wantStderr string
	}{
		{"success", nil, 0, ""},
		{"a failure: the run found something broken", Failure("3 invariants broken"), 1, "loadtest: 3 invariants broken\n"},
		{"a wrapped failure", fmt.Errorf("mysql: %w", Failure("oversold")), 1, "loadtest: mysql: oversold\n"},
		{"-help: the flag package printed the usage", flag.ErrHelp, 2, ""},
		{"a wrapped -help", fmt.Errorf("parse: %w", flag.ErrHelp), 2, ""},
		{"a usage or setup error", errors.New("need at least one target"), 2, "loadtest: need at least one target\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if got := ExitStatus(&stderr, "loadtest", tc.err); got != tc.want {
				t.Errorf("ExitStatus(%v) = %d, want %d", tc.err, got, tc.want)
			}
			if diff := cmp.Diff(tc.wantStderr, stderr.String()); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSplitList(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"mysql,redis,zk", []string{"mysql", "redis", "zk"}},
		{" http://a:1/ , http://b:2//,,", []string{"http://a:1", "http://b:2"}},
		{"", nil},
		{" , ", nil},
	} {
		if diff := cmp.Diff(tc.want, SplitList(tc.in)); diff != "" {
			t.Errorf("SplitList(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}

func TestProgress(t *testing.T) {
	var buf bytes.Buffer
	Progress(&buf)("%s: %d units", "mysql", 500)
	if !regexp.MustCompile(`^\d\d:\d\d:\d\d  mysql: 500 units\n$`).MatchString(buf.String()) {
		t.Errorf("progress line %q, want the time of day, two spaces and the message", buf.String())
	}
}
