package proof

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"time"

	"github.com/seckill-go/seckill-go/loadtest/internal/attack"
)

// killAndRestart is `-chaos kill`: -chaos-after into the attack it SIGKILLs one replica of the
// local stack, as a crash would, and starts it again at once; the attack goes on meanwhile. It
// returns what it did, timed from start; nothing if the attack (ctx) ended before -chaos-after.
func (c chaosOptions) killAndRestart(ctx context.Context, start time.Time, say func(string, ...any)) []attack.Event {
	var events []attack.Event
	note := func(what string) {
		events = append(events, attack.Event{T: time.Since(start).Seconds(), What: what})
		say("chaos: %s", what)
	}
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(c.after):
	}
	// Once begun, the kill and the restart run to the end even if the attack is over.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	n := strconv.Itoa(c.replica)
	if out, err := exec.CommandContext(cctx, c.script, "kill", n).CombinedOutput(); err != nil {
		note(fmt.Sprintf("kill replica %s failed: %v: %s", n, err, out))
		return events
	}
	note("replica " + n + " SIGKILLed")
	if out, err := exec.CommandContext(cctx, c.script, "start", n).CombinedOutput(); err != nil {
		note(fmt.Sprintf("restart replica %s failed: %v: %s", n, err, out))
		return events
	}
	note("replica " + n + " restarted and healthy")
	return events
}
