package itest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Server is a throwaway server process of a test's own (a redis-server, a memcached), on a port
// of its own, that the test may crash and start again: the lock zoo's Redlock and Memcached fault
// tests restart the servers a lock lives on, which the shared services of `make services` must
// not suffer. A RedisServer or Memcached keeps nothing on disk, so a restart starts it empty, the
// way a server without persistence comes back; the nodes of a RedisCluster, RedisSentinel or
// ZKEnsemble keep their directory across a Kill and Start (nodes.conf, the sentinel's config,
// ZooKeeper's data and myid). It is killed when the test ends.
type Server struct {
	tb   testing.TB
	name string
	args []string
	addr string

	mu     sync.Mutex
	proc   *os.Process
	exited chan error // receives the running process's exit
	logs   *syncBuffer
}

// syncBuffer is a bytes.Buffer that the process's output copiers and Logs may use at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// RedisServer starts a redis-server with no persistence (no RDB snapshot, no append-only file)
// on a free port. It fails the test, naming the fix, if redis-server is not installed.
func RedisServer(tb testing.TB) *Server {
	tb.Helper()
	port := strconv.Itoa(FreePort(tb))
	return startServer(tb, "redis-server", port, "redis-server", "--bind", "127.0.0.1", "--port", port,
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--dir", tb.TempDir())
}

// Memcached starts a memcached (64 MB, TCP only) on a free port. It fails the test, naming the
// fix, if memcached is not installed.
func Memcached(tb testing.TB) *Server {
	tb.Helper()
	port := strconv.Itoa(FreePort(tb))
	// memcached refuses to run as root unless told a user to become.
	return startServer(tb, "memcached", port, "memcached", "-l", "127.0.0.1", "-p", port, "-U", "0", "-m", "64", "-u", "nobody")
}

func startServer(tb testing.TB, name, port string, args ...string) *Server {
	tb.Helper()
	Integration(tb)
	if _, err := exec.LookPath(args[0]); err != nil {
		tb.Fatalf("%s is not installed (%s)", args[0], hint)
	}
	s := &Server{tb: tb, name: name, args: args, addr: net.JoinHostPort("127.0.0.1", port)}
	s.Start()
	tb.Cleanup(s.Kill)
	return s
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.addr }

// Running reports whether the server was started and not killed since.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil
}

// Logs returns what the server's current run has written to stdout and stderr so far.
func (s *Server) Logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.logs == nil {
		return ""
	}
	return s.logs.String()
}

// Kill SIGKILLs the server, as a crash would, and waits until it has exited. Killing a server that
// is not running does nothing.
func (s *Server) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return
	}
	_ = s.proc.Signal(syscall.SIGKILL)
	<-s.exited
	s.proc = nil
}

// Restart kills the server and starts it again, empty: what a server without persistence
// remembers after a crash.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Kill()
	s.Start()
}

// Start starts the server (again, empty, on the same port, after a Kill) and waits until it
// answers. Starting a running server does nothing.
func (s *Server) Start() {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		return
	}
	// A port freed by a kill a moment ago may still be taken for an instant: try a few times.
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.logs = &syncBuffer{}
		cmd := exec.Command(s.args[0], s.args[1:]...)
		cmd.Stdout, cmd.Stderr = s.logs, s.logs
		if err := cmd.Start(); err != nil {
			s.tb.Fatalf("start %s: %v", s.name, err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		err := waitDial(s.addr, exited, deadline)
		if err == nil {
			s.proc, s.exited = cmd.Process, exited
			return
		}
		_ = cmd.Process.Kill()
		if time.Now().After(deadline) {
			s.tb.Fatalf("%s on %s did not start: %v\n%s", s.name, s.addr, err, s.logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitDial waits until addr accepts a connection, the process exits, or deadline passes.
func waitDial(addr string, exited <-chan error, deadline time.Time) error {
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case werr := <-exited:
			return fmt.Errorf("exited: %v", werr)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer: %w", err)
		}
	}
}
