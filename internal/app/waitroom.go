package app

import (
	"crypto/ed25519"
	"crypto/rand"
	"log/slog"

	"github.com/seckill-go/seckill-go/internal/board"
	"github.com/seckill-go/seckill-go/internal/config"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/waitroom"
	"github.com/seckill-go/seckill-go/internal/waitroom/admit"
	"github.com/seckill-go/seckill-go/internal/waitroom/redisroom"
)

// waitingRooms makes both sides of the waiting rooms, on rooms in the main Redis under the
// database's name (as every other key of the deployment): the visitors' queue, passes signed by
// signer, and this replica's admission ticker over the sales of the board.
func (r *resources) waitingRooms(signer *admit.Signer, b *board.Board) (*waitroom.Queue, *waitroom.Ticker, error) {
	rooms, err := redisroom.New(r.rdb, r.cfg.DatabaseName())
	if err != nil {
		return nil, nil, err
	}
	q, err := waitroom.NewQueue(rooms, signer, nil)
	if err != nil {
		return nil, nil, err
	}
	t, err := waitroom.NewTicker(r.log.With("component", "waitroom"), rooms, boardProducts(b), r.cfg.Waitroom.Tick, nil)
	if err != nil {
		return nil, nil, err
	}
	return q, t, nil
}

// roomReturns tells the waiting rooms of the units that the checkout's returns give back, so that
// their next in line are admitted for them: the process whose return gave them back tells the
// room once (never the replicas the change feed tells: they would credit it once each). The
// product is read from MySQL, once per returned batch: the expirer of a worker holds no board.
func (r *resources) roomReturns() (*waitroom.Returns, error) {
	rooms, err := redisroom.New(r.rdb, r.cfg.DatabaseName())
	if err != nil {
		return nil, err
	}
	return waitroom.NewReturns(rooms, r.store.Product)
}

// boardProducts says which of the board's products changed since its last call, from memory
// (every product at the first, and again whenever the board is a new one): the ticker admits in
// the waiting rooms among them and deletes the rooms of the past epochs of all (a reset may end a
// waiting room). The ticker calls it from its one goroutine.
func boardProducts(b *board.Board) func() []sale.Product {
	var (
		board string
		seq   uint64
	)
	return func() []sale.Product {
		s := b.Snapshot()
		from := seq
		if s.Board != board {
			from = 0
		}
		items := s.Since(from)
		board, seq = s.Board, s.Seq
		out := make([]sale.Product, 0, len(items))
		for _, it := range items {
			out = append(out, it.Product)
		}
		return out
	}
}

// passKeys returns what signs the waiting rooms' admission passes and what checks them: the
// configured key (SECKILL_WAITROOM_KEY), shared by every replica, or a key this process draws
// for itself, with a warning: the passes it signs are refused by every other replica, and its own
// purchase path refuses theirs.
func passKeys(log *slog.Logger, cfg *config.Config) (*admit.Signer, *admit.Verifier, error) {
	var key ed25519.PrivateKey
	if cfg.Waitroom.Key != nil {
		key = ed25519.NewKeyFromSeed(cfg.Waitroom.Key)
	} else {
		var err error
		if _, key, err = ed25519.GenerateKey(rand.Reader); err != nil {
			return nil, nil, err
		}
	}
	signer, err := admit.NewSigner(key)
	if err != nil {
		return nil, nil, err
	}
	verifier, err := admit.NewVerifier(signer.Public())
	if err != nil {
		return nil, nil, err
	}
	if cfg.Waitroom.Key == nil {
		log.Warn("SECKILL_WAITROOM_KEY is not set: this replica signs the waiting rooms' passes with a key of its own; the other replicas refuse them, and it refuses theirs",
			"kid", signer.KeyID())
	}
	return signer, verifier, nil
}
