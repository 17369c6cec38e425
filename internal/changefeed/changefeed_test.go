package changefeed

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seckill-go/seckill-go/internal/sale"
)

// TestSubscribeBacksOff: while Redis drops every connection, the feed tries again after waits
// that grow (100 ms, 200, 400...), not in a tight loop nor at a constant pace: about five
// connections in two seconds (go-redis adds its own dial and handshake to each).
func TestSubscribeBacksOff(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	accepts := 0
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			accepts++
			mu.Unlock()
			c.Close()
		}
	})
	defer wg.Wait()
	defer ln.Close()
	rdb := redis.NewClient(&redis.Options{Addr: ln.Addr().String()})
	defer rdb.Close()
	f, err := New(slog.New(slog.NewTextHandler(io.Discard, nil)), rdb, "test")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = f.Run(ctx, func(sale.Change) {})
	mu.Lock()
	defer mu.Unlock()
	if accepts < 3 || accepts > 7 {
		t.Errorf("%d connections in 2 s, want about 5 (3 to 7)", accepts)
	}
}
