package orderqueue_test

import (
	"github.com/seckill-go/seckill-go/internal/orderqueue"
	"github.com/seckill-go/seckill-go/internal/store"
)

// The store is what the relays and consumers run on in the app: it satisfies every port they
// declare. (Checked here, not in store, so that store does not compile kafka-go.)
var (
	_ orderqueue.Outbox       = (*store.Store)(nil)
	_ orderqueue.OrderStore   = (*store.Store)(nil)
	_ orderqueue.EventOutbox  = (*store.Store)(nil)
	_ orderqueue.EventTallier = (*store.Store)(nil)
)
