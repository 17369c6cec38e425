package store

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill-go/seckill-go/internal/sale"
)

// TestRetryConflicts pins what inTx and retryLocks retry: a deadlock (1213) or a lock wait (1205)
// runs again, four times in all, and the last one comes back as sale.ErrUnavailable; any other
// error comes back at once.
func TestRetryConflicts(t *testing.T) {
	deadlock := &mysql.MySQLError{Number: errDeadlock, Message: "Deadlock found"}
	lockWait := &mysql.MySQLError{Number: errLockWaitTimeout, Message: "Lock wait timeout exceeded"}
	dup := &mysql.MySQLError{Number: errDupEntry, Message: "Duplicate entry"}
	boom := errors.New("boom")
	tests := []struct {
		name        string
		errs        []error // what the attempts return, in turn; nil after the list
		wantCalls   int
		wantErr     error // nil: success
		unavailable bool  // the error wraps sale.ErrUnavailable
	}{
		{name: "success", wantCalls: 1},
		{name: "two deadlocks, then success", errs: []error{deadlock, deadlock}, wantCalls: 3},
		{name: "three lock waits, then success", errs: []error{lockWait, lockWait, lockWait}, wantCalls: 4},
		{name: "four deadlocks: gives up", errs: []error{deadlock, deadlock, deadlock, deadlock, deadlock}, wantCalls: 4, wantErr: deadlock, unavailable: true},
		{name: "four lock waits: gives up", errs: []error{lockWait, lockWait, lockWait, lockWait, lockWait}, wantCalls: 4, wantErr: lockWait, unavailable: true},
		{name: "duplicate: not retried", errs: []error{dup}, wantCalls: 1, wantErr: dup},
		{name: "other error: not retried", errs: []error{boom}, wantCalls: 1, wantErr: boom},
		{name: "domain error after a deadlock", errs: []error{deadlock, sale.ErrSoldOut}, wantCalls: 2, wantErr: sale.ErrSoldOut},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			err := retryConflicts(context.Background(), "test", func() error {
				calls++
				if calls <= len(tt.errs) {
					return tt.errs[calls-1]
				}
				return nil
			})
			if calls != tt.wantCalls {
				t.Errorf("%d attempts, want %d", calls, tt.wantCalls)
			}
			switch {
			case tt.wantErr == nil && err != nil:
				t.Errorf("err = %v, want nil", err)
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Errorf("err = %v, want one wrapping %v", err, tt.wantErr)
			}
			if got := errors.Is(err, sale.ErrUnavailable); got != tt.unavailable {
				t.Errorf("err = %v: wraps sale.ErrUnavailable: %v, want %v", err, got, tt.unavailable)
			}
		})
	}
}

// TestRetryConflictsStopsWhenCtxEnds: a ctx that ends while a retry waits ends the retries with
// ctx's error, not the conflict's.
func TestRetryConflictsStopsWhenCtxEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	err := retryConflicts(ctx, "test", func() error {
		calls++
		cancel()
		return &mysql.MySQLError{Number: errDeadlock}
	})
	if calls != 1 || !errors.Is(err, context.Canceled) {
		t.Errorf("%d attempts, err = %v; want 1 attempt and context.Canceled", calls, err)
	}
}

// TestConflictBackoff: the waits between the attempts are random (full jitter), below 10, 20 and
// 40 ms, and there are three of them.
func TestConflictBackoff(t *testing.T) {
	bounds := []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond}
	longest := make([]time.Duration, len(bounds))
	for range 200 {
		b := conflictBackoff()
		for i, bound := range bounds {
			d, stop := b.Next()
			if stop || d < 0 || d >= bound {
				t.Fatalf("wait %d: %v (stop %v), want one in [0, %v)", i+1, d, stop, bound)
			}
			longest[i] = max(longest[i], d)
		}
		if d, stop := b.Next(); !stop {
			t.Fatalf("a fourth wait (%v): want the retries spent after three", d)
		}
	}
	for i, bound := range bounds {
		if longest[i] < bound/2 {
			t.Errorf("wait %d: the longest of 200 was %v, want random up to %v", i+1, longest[i], bound)
		}
	}
}

// TestWaitReady: the store pings an absent server again and again, waiting 100 ms, then 200,
// 400..., until its ctx ends, and then names the last failure.
func TestWaitReady(t *testing.T) {
	var pings atomic.Int32
	log := slog.New(countingHandler{slog.NewTextHandler(io.Discard, nil), "waiting for MySQL", &pings})
	db, err := sql.Open("mysql", "root@tcp(127.0.0.1:1)/seckill?timeout=1s") // nothing listens on port 1
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := &Store{sql: db, log: log}

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err = s.waitReady(ctx)
	var netErr net.Error
	if err == nil || !strings.Contains(err.Error(), "MySQL not reachable") || !errors.As(err, &netErr) {
		t.Fatalf("waitReady = %v, want MySQL not reachable, with the ping's error", err)
	}
	// Pings at about 0, 100, 300 and 700 ms; a constant wait would make about ten, none one.
	if n := pings.Load(); n < 3 || n > 5 {
		t.Errorf("%d pings in a second, want 4 (3 to 5)", n)
	}

	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.waitReady(ended); !errors.Is(err, context.Canceled) {
		t.Errorf("waitReady with an ended ctx = %v, want context.Canceled", err)
	}
}

// countingHandler counts the records whose message is msg.
type countingHandler struct {
	slog.Handler
	msg string
	n   *atomic.Int32
}

func (h countingHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.n.Add(1)
	}
	return h.Handler.Handle(ctx, r)
}
