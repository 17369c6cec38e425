package itest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// The ports FreePort hands out: below the kernel's ephemeral range (32768–60999 on Linux), so that
// no connection or listener on port 0, of any process, is given one of them while its test holds
// it; above the local stack's fixed ports (Sentinel's 26379 among them).
const (
	portLow  = 27000
	portHigh = 32700
)

// portLocks is where FreePort's claims live: one file per port, locked (flock) by the test binary
// that holds it. The lock dies with the process, so a crashed test leaves no stale claim.
var portLocks = filepath.Join(os.TempDir(), "seckill-go-test-ports")

// FreePort returns a TCP port on 127.0.0.1 for an address nothing listens on, or a server that can
// only be given a port number (nginx, ZooKeeper, a broker restarted on its port). The port is the
// test's until it ends: it comes from outside the kernel's ephemeral range, so the kernel gives it
// to nobody else, and it is claimed with a file lock, so another test, in this or another test
// binary running beside it, does not pick it. A server of the program itself is better handed a
// listener bound on port 0 (apptest does).
func FreePort(tb testing.TB) int {
	tb.Helper()
	if err := os.MkdirAll(portLocks, 0o777); err != nil {
		tb.Fatalf("free port: %v", err)
	}
	for range 200 {
		port := portLow + rand.IntN(portHigh-portLow)
		f, err := claimPort(port)
		if err != nil {
			continue
		}
		tb.Cleanup(func() { f.Close() })
		return port
	}
	tb.Fatalf("free port: no port of %d–%d could be claimed in 200 tries", portLow, portHigh)
	return 0
}

// claimPort locks port's claim file and checks that nothing listens on the port; the open file
// holds the claim until it is closed.
func claimPort(port int) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(portLocks, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("port %d claimed by another test: %w", port, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		f.Close()
		return nil, errors.Join(fmt.Errorf("port %d in use", port), err)
	}
	ln.Close()
	return f, nil
}
