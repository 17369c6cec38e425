package app

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
)

// failpointEnv names the chaos run's test hook (make chaos), off unless set: it kills the process
// with SIGKILL at a chosen point, as a crash there would. Read once, at start, by serve and worker.
//
//	consumer-after-commit        right after the first batch of orders is committed in the
//	                             database, before its offsets are committed
//	consumer-after-commit:PATH   the same, at the first batch committed while the file PATH
//	                             exists; the process that removes PATH is the one that dies, so
//	                             of the replicas armed with one PATH, one dies per file created
//
// A process armed with a PATH that never appears behaves as if unarmed.
const failpointEnv = "SECKILL_TEST_FAILPOINT"

const failpointConsumerAfterCommit = "consumer-after-commit"

// failpoints are the test hooks set from failpointEnv; nil members are off.
type failpoints struct {
	// consumerAfterCommit runs between a batch's database commit and its offset commit.
	consumerAfterCommit func()
}

// parseFailpoints reads failpointEnv's value. An unknown one is an error: a misspelt hook that
// silently did nothing would let a chaos run pass without its fault.
func parseFailpoints(log *slog.Logger, spec string) (failpoints, error) {
	if spec == "" {
		return failpoints{}, nil
	}
	name, trigger, _ := strings.Cut(spec, ":")
	if name != failpointConsumerAfterCommit {
		return failpoints{}, fmt.Errorf("%s=%q: the only failpoint is %s[:PATH]", failpointEnv, spec, failpointConsumerAfterCommit)
	}
	log.Warn("test failpoint armed: this process kills itself after a consumer's database commit", "failpoint", spec)
	fired := false
	return failpoints{consumerAfterCommit: func() {
		if fired {
			return
		}
		if trigger != "" {
			if err := os.Remove(trigger); err != nil {
				if !errors.Is(err, os.ErrNotExist) {
					log.Warn("failpoint trigger", "path", trigger, "err", err)
				}
				return
			}
		}
		fired = true
		log.Error("test failpoint: killing this process between the orders' database commit and the offset commit", "failpoint", spec)
		if p, err := os.FindProcess(os.Getpid()); err == nil {
			_ = p.Kill()
		}
		select {} // SIGKILL is on its way: commit nothing more
	}}, nil
}
