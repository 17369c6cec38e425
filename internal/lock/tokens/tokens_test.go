package tokens_test

import (
	"sync"
	"testing"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/lock/locktest"
	"github.com/seckill-go/seckill-go/internal/lock/tokens"
)

// TestNextIncreases: concurrent takers of one name all get distinct tokens, each taker's in
// increasing order; another name counts apart.
func TestNextIncreases(t *testing.T) {
	rdb := itest.Redis(t)
	tk, err := tokens.NewRedis(rdb, "")
	if err != nil {
		t.Fatal(err)
	}
	name := locktest.Name(t)
	var mu sync.Mutex
	seen := map[uint64]bool{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			var last uint64
			for range 50 {
				n, err := tk.Next(t.Context(), name)
				if err != nil {
					t.Error(err)
					return
				}
				if n <= last {
					t.Errorf("token %d after %d", n, last)
				}
				last = n
				mu.Lock()
				if seen[n] {
					t.Errorf("token %d handed out twice", n)
				}
				seen[n] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != 400 {
		t.Fatalf("%d distinct tokens, want 400", len(seen))
	}
	if n, err := tk.Next(t.Context(), name+"-other"); err != nil || n != 1 {
		t.Fatalf("another name's first token = %d, %v; want 1", n, err)
	}
}
