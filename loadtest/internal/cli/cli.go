// Package cli is the main() that the harness's commands, the load test (loadtest), the bench
// (loadtest/bench) and the buckets run (loadtest/buckets), share: the signals that end a run, the
// exit status each kind of error means, their bare gin child, the way they read a list flag and
// print progress, and how they write a report and name the commit it measured. It holds none of
// any command's logic, and nothing in it but Main exits.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/seckill-go/seckill-go/loadtest/internal/yardstick"
)

// Failure is the error of a run that completed and found the system under test broken: an
// invariant (the load test) or the API's contract (the bench). Any other error means the run
// itself could not be made: a usage or setup error, or an interrupted run.
type Failure string

func (f Failure) Error() string { return string(f) }

// Main is the whole main() of the command called name. In the bare gin child that the
// yardsticks start from this executable it serves that child (yardstick.Main). Otherwise it calls
// run with a context that SIGINT and SIGTERM cancel, and exits with ExitStatus of its error.
func Main(name string, run func(ctx context.Context) error) {
	yardstick.Main(func() int {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return ExitStatus(os.Stderr, name, run(ctx))
	})
}

// ExitStatus is the exit status of a run of the command called name that ended with err: 0 for
// nil, 1 for a Failure, 2 for any other error, flag.ErrHelp included. It writes the error to
// stderr after "name: ", except flag.ErrHelp, for which the flag package has printed the usage.
func ExitStatus(stderr io.Writer, name string, err error) int {
	if err == nil {
		return 0
	}
	if errors.Is(err, flag.ErrHelp) {
		return 2
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	var failed Failure
	if errors.As(err, &failed) {
		return 1
	}
	return 2
}

// SplitList reads a comma-separated flag value: its items trimmed of spaces and of a trailing
// slash (base URLs), empty items dropped.
func SplitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, strings.TrimRight(part, "/"))
		}
	}
	return out
}

// Progress returns a printf for progress lines: each one on w, after the time of day.
func Progress(w io.Writer) func(format string, args ...any) {
	return func(format string, args ...any) {
		fmt.Fprintf(w, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
}

// NewFlagSet is the command line of the command called name, its errors written to stderr.
func NewFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// ParseFlags parses args with fs and then runs the flags' finishers (lists split, paths made
// absolute, defaults that depend on other flags), in order: their errors are reported so.
func ParseFlags(fs *flag.FlagSet, args []string, finishers ...func() error) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	for _, finish := range finishers {
		if err := finish(); err != nil {
			return err
		}
	}
	return nil
}

// EnvOr returns the environment's value of name, or def when it is empty.
func EnvOr(getenv func(string) string, name, def string) string {
	if v := getenv(name); v != "" {
		return v
	}
	return def
}
