package redisroom

import (
	"fmt"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/waitroom"
)

// TestOnACluster: on a Redis Cluster of a test's own (three masters), every key of a room lands
// in one slot, and every script runs there (no CROSSSLOT), whichever master holds the sale.
func TestOnACluster(t *testing.T) {
	t.Parallel()
	c := itest.RedisCluster(t, itest.ClusterOptions{Replicas: -1})
	rdb := c.Client(t, nil)
	ctx := t.Context()
	room, err := New(rdb, "test-"+itest.Suffix(8))
	if err != nil {
		t.Fatal(err)
	}
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	s := waitroom.Settings{Mode: waitroom.WaitingRoom, AdmitRate: 1000, MaxActive: 2, Session: time.Minute,
		OpensAt: now.Add(-time.Second), AbandonAfter: time.Minute}
	masters := map[string]bool{}
	for i := range 12 { // twelve sales: each master holds some
		sale := fmt.Sprintf("sale-%d", i)
		keys := room.Keys(sale).All()
		slot, err := rdb.ClusterKeySlot(ctx, keys[0]).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys[1:] {
			if ks, _ := rdb.ClusterKeySlot(ctx, k).Result(); ks != slot {
				t.Fatalf("%s: slot %d, %s: slot %d", keys[0], slot, k, ks)
			}
		}
		m, err := rdb.MasterForKey(ctx, keys[0])
		if err != nil {
			t.Fatal(err)
		}
		masters[m.Options().Addr] = true
		if err := room.Configure(ctx, sale, s); err != nil {
			t.Fatal(err)
		}
		for _, b := range buyers(3) {
			if _, err := room.Join(ctx, sale, b); err != nil {
				t.Fatalf("%s: join: %v", sale, err)
			}
		}
		if a, err := room.Admit(ctx, sale); err != nil || len(a.Admitted) != 2 {
			t.Fatalf("%s: admit: %+v, %v; want 2 admitted", sale, a, err)
		}
		if err := room.SoldOut(ctx, sale); err != nil {
			t.Fatal(err)
		}
		if err := room.Returned(ctx, sale, 1); err != nil {
			t.Fatal(err)
		}
		if st, err := room.Status(ctx, sale, "b3"); err != nil || st.State != waitroom.Waiting {
			t.Fatalf("%s: b3 after a return: %+v, %v; want waiting", sale, st, err)
		}
		if err := room.Delete(ctx, sale); err != nil {
			t.Fatal(err)
		}
	}
	if len(masters) < 2 {
		t.Fatalf("the sales all landed on %v: the test proves little", masters)
	}
}
