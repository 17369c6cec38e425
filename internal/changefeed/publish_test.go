package changefeed_test

import (
	"context"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/internal/changefeed"
	"github.com/seckill-go/seckill-go/internal/itest"
	"github.com/seckill-go/seckill-go/internal/sale"
)

// TestResetIsPublishedBeforePublishReturns: a reset reaches the other replicas' feeds without the
// publishing feed's queue: here its feed is not even running, and a second feed that is receives
// the reset. A sold out stays queued (it waits for Run).
func TestResetIsPublishedBeforePublishReturns(t *testing.T) {
	rdb := itest.Redis(t)
	ns := "test-reset-" + itest.Suffix(8)
	log := itest.Logger()
	sender, err := changefeed.New(log, rdb, ns)
	if err != nil {
		t.Fatal(err)
	}
	receiver, err := changefeed.New(log, rdb, ns)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan sale.Change, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = receiver.Run(ctx, func(c sale.Change) { got <- c })
	}()
	defer func() { cancel(); <-done }()
	// The receiver answers its subscription with a resync: subscribed from then on.
	select {
	case c := <-got:
		if c.Kind != sale.ChangeResync {
			t.Fatalf("first change %+v, want the subscription's resync", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the receiver never subscribed")
	}

	sender.Publish(ctx, sale.Change{Kind: sale.ChangeSoldOut, ProductID: 7, Epoch: 1}) // queued: nobody runs the sender
	sender.Publish(ctx, sale.Change{Kind: sale.ChangeReset, ProductID: 7, Epoch: 2})
	select {
	case c := <-got:
		if want := (sale.Change{Kind: sale.ChangeReset, ProductID: 7, Epoch: 2}); c != want {
			t.Fatalf("received %+v, want %+v (the sold out stays in the sender's queue)", c, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the reset never arrived: it waited in the queue of a feed that does not run")
	}
}
