package mysqllock_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/lock"
	"github.com/seckill-go/seckill-go/internal/lock/mysqllock"
)

// The holder of the fault tests is this test binary re-executed with holderEnv set (os/exec's
// GO_WANT_HELPER_PROCESS pattern): a process of its own, so that the tests can SIGKILL or
// SIGSTOP it with the lock held, which no goroutine can stand in for.
const (
	holderEnv   = "MYSQLLOCK_TEST_HOLDER"
	holderDSN   = "MYSQLLOCK_TEST_DSN"
	holderName  = "MYSQLLOCK_TEST_NAME"
	holderTTL   = "MYSQLLOCK_TEST_TTL"
	holderNaive = "MYSQLLOCK_TEST_NAIVE"
)

// runHolder acquires the lock and reports on stdout: "held <token>" once granted, "lost" when
// Lost() closes, and, for each "release" line read on stdin, the outcome of Release ("released",
// "not held" or the error). It exits when stdin closes (its parent is gone) without releasing.
func runHolder() int {
	ttl, _ := time.ParseDuration(os.Getenv(holderTTL))
	naive := os.Getenv(holderNaive) != ""
	table := "lock_table"
	if naive {
		table = "lock_table_naive"
	}
	db, err := openHolderDB(os.Getenv(holderDSN))
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	c, err := mysqllock.New(db, mysqllock.Options{TTL: ttl, Naive: naive, Table: table})
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.EnsureTable(ctx); err != nil {
		fmt.Println("error:", err)
		return 1
	}
	l, err := c.Acquire(ctx, os.Getenv(holderName))
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("held", l.Token())
	go func() {
		<-l.Lost()
		fmt.Println("lost")
	}()
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if sc.Text() != "release" {
			continue
		}
		switch err := l.Release(context.Background()); {
		case err == nil:
			fmt.Println("released")
		case errors.Is(err, lock.ErrNotHeld):
			fmt.Println("not held")
		default:
			fmt.Println("error:", err)
		}
	}
	return 0
}

// holder is a running holder process.
type holder struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	token uint64
}

// startHolder starts a holder of the lock name in the database of dsn and waits until it holds.
func startHolder(t *testing.T, dsn, name string, naive bool, ttl time.Duration) *holder {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holderEnv+"=1", holderDSN+"="+dsn, holderName+"="+name, holderTTL+"="+ttl.String())
	if naive {
		cmd.Env = append(cmd.Env, holderNaive+"=1")
	}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &holder{cmd: cmd, stdin: stdin, lines: make(chan string, 16)}
	exited := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			h.lines <- sc.Text()
		}
		close(h.lines)
		_ = cmd.Wait() // once the output is read: Wait closes the pipe
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
	})
	line := h.next(t, 30*time.Second)
	tok, ok := strings.CutPrefix(line, "held ")
	if !ok {
		t.Fatalf("holder process: %q, want held <token>", line)
	}
	if h.token, err = strconv.ParseUint(tok, 10, 64); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *holder) next(t *testing.T, within time.Duration) string {
	t.Helper()
	select {
	case line, ok := <-h.lines:
		if !ok {
			t.Fatal("the holder process exited")
		}
		return line
	case <-time.After(within):
		t.Fatalf("the holder process said nothing for %s", within)
		return ""
	}
}

func (h *holder) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := h.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// TestHolderKilled SIGKILLs a process that holds the lock: its row stays, since nothing tells a
// lock table that its holder died. The naive lock stalls until a person deletes the row; the
// shipped one lets the next caller reap it once its TTL has passed, with a larger token.
func TestHolderKilled(t *testing.T) {
	const ttl = 600 * time.Millisecond // the holder's lease, and the yardstick of the naive stall
	t.Run("naive: the sale stalls until a person cleans up", func(t *testing.T) {
		t.Parallel()
		db, dsn := newDB(t, "")
		c := newClient(t, db, mysqllock.Options{Naive: true, Table: "lock_table_naive"})
		h := startHolder(t, dsn, "killed", true, ttl)
		h.signal(t, syscall.SIGKILL)
		killed := time.Now()
		tries := 0
		for time.Since(killed) < 4*ttl {
			ctx, cancel := context.WithTimeout(t.Context(), ttl/2)
			l, err := c.Acquire(ctx, "killed")
			cancel()
			if err == nil {
				t.Fatalf("granted (token %d) %s after the holder was killed: the naive lock has no expiry", l.Token(), time.Since(killed))
			}
			if !errors.Is(err, lock.ErrTimeout) {
				t.Fatalf("Acquire = %v, want ErrTimeout", err)
			}
			tries++
		}
		if r, ok := lockRow(t, db, c, "killed"); !ok || r.ID != h.token {
			t.Fatalf("row %+v (present %t) after the holder died; want its row, id %d", r, ok, h.token)
		}
		t.Logf("still blocked %s after the kill (%d Acquire calls timed out); cleaning up by hand", time.Since(killed).Round(time.Millisecond), tries)
		if err := c.ForceRelease(t.Context(), "killed"); err != nil {
			t.Fatal(err)
		}
		l := mustAcquire(t, c, "killed")
		if l.Token() <= h.token {
			t.Fatalf("token %d after the dead holder's %d", l.Token(), h.token)
		}
		mustRelease(t, l)
	})
	t.Run("shipped: the next caller reaps the dead holder's row", func(t *testing.T) {
		t.Parallel()
		db, dsn := newDB(t, "")
		a := &attempts{}
		c := newClient(t, db, mysqllock.Options{TTL: ttl, OnAttempt: a.observe})
		h := startHolder(t, dsn, "killed", false, ttl)
		time.Sleep(ttl) // a few renewals: the row's expiry is the watchdog's, not the insert's
		h.signal(t, syscall.SIGKILL)
		killed := time.Now()
		if r, ok := lockRow(t, db, c, "killed"); !ok || r.ID != h.token || !r.Live {
			t.Fatalf("row %+v (present %t) right after the kill; want the holder's, unexpired", r, ok)
		}
		l := mustAcquire(t, c, "killed")
		waited := time.Since(killed)
		// The row was live after the kill (checked above), so the grant came from reaping it.
		// The dead holder renewed about TTL/3 before it died, so its row lived about 2/3 of a
		// TTL longer: the lower bound leaves room for late renewals on a busy machine, the
		// upper one is a liveness claim.
		if waited < ttl/4 || waited > ttl+5*time.Second {
			t.Errorf("granted %s after the kill; the TTL is %s", waited, ttl)
		}
		if l.Token() <= h.token {
			t.Fatalf("token %d after the dead holder's %d", l.Token(), h.token)
		}
		t.Logf("granted %s after the kill (TTL %s), token %d after %d: %s", waited.Round(time.Millisecond), ttl, l.Token(), h.token, a)
		mustRelease(t, l)
	})
}

// TestHolderPaused SIGSTOPs a process that holds the lock for twice its TTL: the lease runs out
// unrenewed, the next caller reaps the row and is granted a larger token. When the paused
// process resumes, its watchdog finds the row gone and Lost() closes, and its Release neither
// succeeds nor touches the new holder's row. (A paused holder that writes before it notices is
// what the storage's fence is for: see internal/stock's lock-table tests.)
func TestHolderPaused(t *testing.T) {
	t.Parallel()
	const ttl = 400 * time.Millisecond
	db, dsn := newDB(t, "")
	c := newClient(t, db, mysqllock.Options{TTL: ttl})
	h := startHolder(t, dsn, "paused", false, ttl)
	h.signal(t, syscall.SIGSTOP)
	paused := time.Now()
	l := mustAcquire(t, c, "paused")
	t.Logf("granted %s into the pause (TTL %s), token %d after %d", time.Since(paused).Round(time.Millisecond), ttl, l.Token(), h.token)
	if l.Token() <= h.token {
		t.Fatalf("token %d after the paused holder's %d", l.Token(), h.token)
	}
	if rest := 2*ttl - time.Since(paused); rest > 0 {
		time.Sleep(rest)
	}
	h.signal(t, syscall.SIGCONT)
	if line := h.next(t, 10*time.Second); line != "lost" {
		t.Fatalf("the resumed holder said %q, want lost", line)
	}
	if _, err := io.WriteString(h.stdin, "release\n"); err != nil {
		t.Fatal(err)
	}
	if line := h.next(t, 10*time.Second); line != "not held" {
		t.Fatalf("the resumed holder's Release: %q, want not held", line)
	}
	if r, ok := lockRow(t, db, c, "paused"); !ok || r.ID != l.Token() {
		t.Fatalf("row %+v (present %t) after the stale Release; want the new holder's, id %d", r, ok, l.Token())
	}
	mustRelease(t, l)
}
