package main

import (
	"bufio"
	"encoding/json"
	"io"
	"maps"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/apptest"
	"github.com/seckill-go/seckill-go/internal/itest"
)

// childEnv, when set, makes the test binary behave as the seckill binary (see TestMain): the
// crash tests start real replicas as child processes and SIGKILL them.
const childEnv = "SECKILL_TEST_AS_SECKILL"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

const adminToken = apptest.AdminToken

// stack wraps apptest.Stack with the child-process replicas only this package can start.
type stack struct{ *apptest.Stack }

func newStack(t *testing.T) *stack { return &stack{apptest.NewStack(t)} }

// instance is one running instance, in this process (start) or a child process (startChild), and
// a client of its API without the admin token.
type instance struct {
	apptest.Client
	stop func()
}

func (s *stack) start(t *testing.T, overrides map[string]string) *instance {
	a := s.Start(t, overrides)
	return &instance{Client: apptest.Client{URL: a.URL}, stop: a.Stop}
}

// startChild runs `seckill serve` as a child process (this test binary, see TestMain), so that it
// can be killed with SIGKILL. The child listens on port 0 and logs the address it got; if it exits
// before that, the test fails at once with the end of its log.
func (s *stack) startChild(t *testing.T, overrides map[string]string) *instance {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SECKILL_") {
			env = append(env, kv)
		}
	}
	env = append(env, childEnv+"=1", "SECKILL_MYSQL_DSN="+s.DSN)
	for k, v := range s.Env {
		env = append(env, k+"="+v)
	}
	// Info is the level of the line that gives the address (the last value of a name wins).
	env = append(env, "SECKILL_HTTP_ADDR=127.0.0.1:0", "SECKILL_LOG_LEVEL=info")
	for k, v := range overrides {
		env = append(env, k+"="+v)
	}
	cmd := exec.Command(os.Args[0], "serve")
	cmd.Env = env
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logs := &logTail{}
	n := children.Add(1)
	listening := make(chan string, 1)
	exited := make(chan struct{})
	var waitErr error
	go func() {
		sc := bufio.NewScanner(io.TeeReader(out, itest.LogWriter()))
		for sc.Scan() {
			logs.add(sc.Text())
			var line struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "listening" {
				select {
				case listening <- line.Addr:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, out) // past a line too long to scan: the child must never block on its output
		waitErr = cmd.Wait()            // only once the output is read: Wait closes the pipe
		close(exited)
	}()
	var once sync.Once
	a := &instance{stop: func() { once.Do(func() { _ = cmd.Process.Signal(syscall.SIGKILL); <-exited }) }}
	t.Cleanup(a.stop)
	t.Cleanup(func() {
		// A failed test shows what each child warned of: a stalled consumer group, a broker or
		// lock service that would not answer. (Its whole log: SECKILL_TEST_LOG=info.)
		if t.Failed() {
			t.Logf("child %d (pid %d): its last warnings and errors:\n%s", n, cmd.Process.Pid, logs.warnings())
		}
	})
	select {
	case addr := <-listening:
		a.URL = "http://" + addr
	case <-exited:
		t.Fatalf("the child exited before it served (%v); the end of its log:\n%s", waitErr, logs)
	case <-time.After(90 * time.Second):
		t.Fatalf("the child did not serve within 90 s; the end of its log:\n%s", logs)
	}
	return a
}

// children numbers the child processes of a test binary, for their failure messages.
var children atomic.Int64

// logTail keeps the last lines a child process wrote, and apart from them its last warnings and
// errors, for a failure message.
type logTail struct {
	mu    sync.Mutex
	lines []string
	warns []string
}

func (l *logTail) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = keepLast(append(l.lines, line), 30)
	warn := strings.Contains(line, `"level":"WARN"`) || strings.Contains(line, `"level":"ERROR"`)
	if warn && !strings.Contains(line, `"msg":"http request"`) { // the access log repeats "request failed"
		l.warns = keepLast(append(l.warns, line), 40)
	}
}

// keepLast returns the last n of lines.
func keepLast(lines []string, n int) []string {
	if len(lines) > n {
		return lines[len(lines)-n:]
	}
	return lines
}

func (l *logTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

func (l *logTail) warnings() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.warns) == 0 {
		return "(none)"
	}
	return strings.Join(l.warns, "\n")
}

var adminHeader = map[string]string{"Authorization": "Bearer " + adminToken}

// createProduct creates a product through the admin API, its sale open now.
func createProduct(t *testing.T, a *instance, strategy string, stockN int, extra map[string]any) int64 {
	t.Helper()
	body := map[string]any{"name": "e2e " + strategy, "price_cents": 1999, "stock": stockN, "strategy": strategy}
	maps.Copy(body, extra)
	return apptest.Client{URL: a.URL, Token: adminToken}.CreateProduct(t, body)
}

func purchasePath(id int64) string {
	return "/api/v1/products/" + strconv.FormatInt(id, 10) + "/purchase"
}
