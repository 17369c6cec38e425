package itest

import (
	"net"
	"strconv"
	"testing"
)

// TestFreePortClaims: a port handed out is outside the kernel's ephemeral range and stays claimed
// while its test runs, against a second claim (another test binary does what claimPort does); a
// port something listens on is not handed out.
func TestFreePortClaims(t *testing.T) {
	port := FreePort(t)
	if port < portLow || port >= portHigh {
		t.Fatalf("port %d outside %d–%d", port, portLow, portHigh)
	}
	if f, err := claimPort(port); err == nil {
		f.Close()
		t.Fatalf("port %d claimed twice", port)
	}
	other := FreePort(t)
	if other == port {
		t.Fatalf("port %d handed out twice", port)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(portLow+(port-portLow+1)%(portHigh-portLow)))
	if err != nil {
		t.Skipf("the port next to %d is taken: %v", port, err)
	}
	defer ln.Close()
	busy := ln.Addr().(*net.TCPAddr).Port
	if f, err := claimPort(busy); err == nil {
		f.Close()
		t.Fatalf("port %d, listened on, was claimed", busy)
	}
}
