package ratelimit

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// batcher is the Redis client as redis_rate sees it, with the limiter's script calls combined:
// the calls that arrive while a pipeline is under way wait for it and go together in the next
// one, so that N keys asked at once cost one round trip and one write, not N. A flash sale asks
// about a new buyer on nearly every purchase (each buyer tries once or twice): leases cannot
// help there, and a round trip each was most of the limiter's cost. No goroutine of its own
// (combining, as the sale's deductions are): the first caller to find no pipeline under way
// sends one, then hands the sending on to the first call that queued meanwhile, so that no
// caller carries others' calls for long. A call waits for at most two pipelines, each bounded by
// the timeout; it does not watch its context, as the call handed the sending must take it.
type batcher struct {
	rdb     redis.UniversalClient
	timeout time.Duration

	mu      sync.Mutex
	sending bool
	pending []*batchedCall
}

type batchedCall struct {
	sha  string
	keys []string
	args []any
	cmd  *redis.Cmd
	done chan struct{} // closed once cmd holds the answer
	lead chan struct{} // closed when this call is to send the next pipeline
}

// maxBatch bounds one pipeline.
const maxBatch = 256

// EvalSha queues the call and returns its answer once a pipeline has carried it.
func (b *batcher) EvalSha(_ context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	c := &batchedCall{sha: sha, keys: keys, args: args, done: make(chan struct{}), lead: make(chan struct{})}
	b.mu.Lock()
	b.pending = append(b.pending, c)
	lead := !b.sending
	b.sending = true
	b.mu.Unlock()
	if lead {
		b.send()
	}
	select {
	case <-c.done:
	case <-c.lead:
		b.send()
		<-c.done
	}
	return c.cmd
}

// send sends one pipeline of the pending calls (the sender's own first), then hands the sending
// to the first call left pending, if any.
func (b *batcher) send() {
	b.mu.Lock()
	calls := b.pending
	if len(calls) > maxBatch {
		calls = calls[:maxBatch:maxBatch]
	}
	b.pending = b.pending[len(calls):]
	b.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
	pipe := b.rdb.Pipeline()
	for _, c := range calls {
		c.cmd = pipe.EvalSha(ctx, c.sha, c.keys, c.args...)
	}
	_, _ = pipe.Exec(ctx) // each command holds its own answer or error
	cancel()
	for _, c := range calls {
		close(c.done)
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.pending) == 0 {
		b.sending, b.pending = false, nil
		return
	}
	close(b.pending[0].lead)
}

// The rest of what redis_rate asks of a client goes straight to Redis: Eval only when Redis
// lost the script (it answers NOSCRIPT to EvalSha).

func (b *batcher) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return b.rdb.Eval(ctx, script, keys, args...)
}

func (b *batcher) EvalRO(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return b.rdb.EvalRO(ctx, script, keys, args...)
}

func (b *batcher) EvalShaRO(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	return b.rdb.EvalShaRO(ctx, sha, keys, args...)
}

func (b *batcher) ScriptExists(ctx context.Context, hashes ...string) *redis.BoolSliceCmd {
	return b.rdb.ScriptExists(ctx, hashes...)
}

func (b *batcher) ScriptLoad(ctx context.Context, script string) *redis.StringCmd {
	return b.rdb.ScriptLoad(ctx, script)
}

func (b *batcher) Del(ctx context.Context, keys ...string) *redis.IntCmd {
	return b.rdb.Del(ctx, keys...)
}
