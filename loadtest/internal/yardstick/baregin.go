package yardstick

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gin-gonic/gin"
)

// childEnv marks a process started by StartBareGin: its main must call RunChild first thing
// (see IsChild, or let Main do both). Re-executing the running binary needs no compiler at run time, so it works
// from `go run`, from a test binary and from the load test's scratch image alike.
const childEnv = "SECKILL_YARDSTICK_CHILD"

// bareGinChild is childEnv's value for the bare gin ceiling.
const bareGinChild = "bare-gin"

// IsChild reports whether this process is a yardstick child that StartBareGin started: then the
// program must call RunChild and nothing else.
func IsChild(getenv func(string) string) bool { return getenv(childEnv) != "" }

// Main runs this process as what it was started as, and exits with its status: the bare gin
// child when StartBareGin started it (see IsChild; exit status 0, or 2 with the error on stderr),
// parent otherwise. The main, or TestMain, of a program that calls StartBareGin without an exe
// hands it the rest of its work: yardstick.Main(m.Run).
func Main(parent func() int) {
	if !IsChild(os.Getenv) {
		os.Exit(parent())
	}
	if err := RunChild(os.Getenv, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "%s: bare gin: %v\n", filepath.Base(os.Args[0]), err)
		os.Exit(2)
	}
	os.Exit(0)
}

// RunChild is the whole life of a child process: it serves BareGinHandler on a free loopback
// port, writes "listening <addr>" to stdout, and returns when stdin closes (its parent stopped it
// or died) or at SIGTERM/SIGINT.
func RunChild(getenv func(string) string, stdin io.Reader, stdout io.Writer) error {
	if v := getenv(childEnv); v != bareGinChild {
		return fmt.Errorf("yardstick child %q: unknown", v)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		cancel()
	}()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	gin.SetMode(gin.ReleaseMode) // this process runs nothing else
	srv := &http.Server{Handler: BareGinHandler(), ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	if _, err := fmt.Fprintf(stdout, "listening %s\n", ln.Addr()); err != nil {
		return err
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer scancel()
	return srv.Shutdown(sctx)
}

// BareGinHandler is the ceiling of the HTTP layer, two routes of the app with none of the app
// behind them. gin.New(): no middleware, no logger, no recovery.
//
//   - POST /api/v1/products/{id}/purchase, the purchase ceiling: the work of a handler that
//     refuses early. It parses the product id, decodes the JSON body with encoding/json and
//     DisallowUnknownFields, as a real handler does, and answers 409 sold_out with c.JSON.
//   - GET /api/v1/products/{id}, the read ceiling: it parses the product id and answers a fixed
//     product (ReadCeilingProduct), rendered once, with its ETag and Cache-Control, as a handler
//     answering from memory does.
func BareGinHandler() http.Handler {
	type purchase struct {
		UserID   string `json:"user_id"`
		Quantity *int   `json:"quantity"`
	}
	type apiError struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	type errorBody struct {
		Error apiError `json:"error"`
	}
	soldOut := errorBody{apiError{Code: "sold_out", Message: "sold out"}}
	r := gin.New()
	r.POST("/api/v1/products/:id/purchase", func(c *gin.Context) {
		id, err := strconv.ParseInt(c.Param("id"), 10, 64)
		if err != nil || id <= 0 {
			c.JSON(http.StatusBadRequest, errorBody{apiError{Code: "invalid_request", Message: "bad product id"}})
			return
		}
		dec := json.NewDecoder(c.Request.Body)
		dec.DisallowUnknownFields()
		var body purchase
		if err := dec.Decode(&body); err != nil || body.UserID == "" {
			c.JSON(http.StatusBadRequest, errorBody{apiError{Code: "invalid_request", Message: "bad purchase body"}})
			return
		}
		c.JSON(http.StatusConflict, soldOut)
	})
	product := []byte(ReadCeilingProduct)
	sum := sha256.Sum256(product)
	etag := fmt.Sprintf(`"%x"`, sum[:8])
	r.GET("/api/v1/products/:id", func(c *gin.Context) {
		id, err := strconv.ParseInt(c.Param("id"), 10, 64)
		if err != nil || id <= 0 {
			c.JSON(http.StatusBadRequest, errorBody{apiError{Code: "invalid_request", Message: "bad product id"}})
			return
		}
		c.Header("Cache-Control", "public, max-age=1, s-maxage=1, stale-while-revalidate=1")
		c.Header("ETag", etag)
		c.Data(http.StatusOK, "application/json; charset=utf-8", product)
	})
	return r
}

// ReadCeilingProduct is the product the read ceiling answers: the shape and size of the app's,
// its viewer figures (stats, 30 seconds of rates) included.
var ReadCeilingProduct = `{"id":1,"name":"bench · read path","price_cents":100,"stock":99999000,"initial_stock":100000000,` +
	`"strategy":"mysql","sale_starts_at":"2026-11-28T08:00:00Z","sale_ends_at":"2026-11-29T08:00:00Z",` +
	`"per_user_limit":1,"listed":false,"state":"on_sale","stats":{"initial_stock":100000000,"stock":99999000,` +
	`"sold_units":1000,"requests_per_sec":0,"accepted_per_sec":0,"rate_window_sec":5,"rates_available":true,` +
	`"per_second":{"start":1795852800,"requests":[` + zeros(30) + `],"accepted":[` + zeros(30) + `]}}}`

// zeros is n zeros, comma-separated.
func zeros(n int) string { return strings.TrimSuffix(strings.Repeat("0,", n), ",") }

// Process is a child process serving the bare gin ceiling.
type Process struct {
	// URL is its base URL, http://127.0.0.1:port.
	URL   string
	Pid   int
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan error

	stopOnce sync.Once
	stopErr  error
}

// StartBareGin starts the bare gin ceiling in a process of its own: the executable exe (empty:
// this program, which must then call RunChild when IsChild) re-run with childEnv set, its stderr
// to logw (nil: discarded). It returns once the child listens. Stop it with Stop; it also exits
// by itself when this process dies, since its stdin then closes.
func StartBareGin(ctx context.Context, exe string, logw io.Writer) (*Process, error) {
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("bare gin: %w", err)
		}
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), childEnv+"="+bareGinChild)
	cmd.Stderr = logw
	// Its own process group: a Ctrl-C in the terminal reaches the parent, which stops the child.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bare gin: start %s: %w", exe, err)
	}
	p := &Process{Pid: cmd.Process.Pid, cmd: cmd, stdin: stdin, done: make(chan error, 1)}

	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			addr <- strings.TrimPrefix(sc.Text(), "listening ")
		}
		close(addr)
		_, _ = io.Copy(io.Discard, stdout)
		p.done <- cmd.Wait()
	}()
	select {
	case a, ok := <-addr:
		if ok && strings.HasPrefix(a, "127.0.0.1:") {
			p.URL = "http://" + a
			return p, nil
		}
		_ = p.Stop()
		return nil, fmt.Errorf("bare gin: the child did not say where it listens (got %q)", a)
	case <-ctx.Done():
		_ = p.Stop()
		return nil, ctx.Err()
	case <-time.After(30 * time.Second):
		_ = p.Stop()
		return nil, errors.New("bare gin: the child did not listen within 30 s")
	}
}

// Stop ends the child by its pid: SIGTERM, then SIGKILL after 5 s. It waits for the exit; a
// second call returns what the first did.
func (p *Process) Stop() error {
	p.stopOnce.Do(func() {
		_ = p.stdin.Close()
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
			p.stopErr = fmt.Errorf("bare gin (pid %d) ignored SIGTERM: killed", p.Pid)
		}
	})
	return p.stopErr
}
