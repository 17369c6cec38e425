package app

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
)

// failpointEnv names the chaos run's test hooks (make chaos), off unless set: each kills the
// process with SIGKILL at a chosen point, as a crash there would. Read once, at start, by serve
// and worker. Its value is a comma-separated list of
//
//	consumer-after-commit     right after the first batch of orders is committed in the
//	                          database, before its offsets are committed
//	persister-before-commit   when the redis-lua persister has read a batch of accepted purchases
//	                          from a stream and not written it to MySQL yet (pending in Redis)
//	persister-after-commit    right after the persister committed a batch to MySQL, before it
//	                          acknowledged and deleted its entries in the stream
//	expirer-after-expire      right after the expirer committed a batch of expired orders, before
//	                          it returned their units to the stock
//
// each optionally followed by :PATH: the hook then fires at the first such point reached while
// the file PATH exists; the process that removes PATH is the one that dies, so of the processes
// armed with one PATH, one dies per file created. A process armed with a PATH that never appears
// behaves as if unarmed.
const failpointEnv = "SECKILL_TEST_FAILPOINT"

const (
	failpointConsumerAfterCommit   = "consumer-after-commit"
	failpointPersisterBeforeCommit = "persister-before-commit"
	failpointPersisterAfterCommit  = "persister-after-commit"
	failpointExpirerAfterExpire    = "expirer-after-expire"
)

var failpointNames = []string{failpointConsumerAfterCommit, failpointPersisterBeforeCommit, failpointPersisterAfterCommit, failpointExpirerAfterExpire}

// failpoints are the test hooks set from failpointEnv; nil members are off.
type failpoints struct {
	// consumerAfterCommit runs between a batch's database commit and its offset commit.
	consumerAfterCommit func()
	// persisterBeforeCommit runs between a persister's stream read and its MySQL commit;
	// persisterAfterCommit between that commit and the entries' XACK+XDEL.
	persisterBeforeCommit, persisterAfterCommit func()
	// expirerAfterExpire runs between an expiry batch's commit and the return of its units.
	expirerAfterExpire func()
}

// parseFailpoints reads failpointEnv's value. An unknown one is an error: a misspelt hook that
// silently did nothing would let a chaos run pass without its fault.
func parseFailpoints(log *slog.Logger, spec string) (failpoints, error) {
	var fp failpoints
	if spec == "" {
		return fp, nil
	}
	for _, one := range strings.Split(spec, ",") {
		name, trigger, _ := strings.Cut(one, ":")
		var hook *func()
		switch name {
		case failpointConsumerAfterCommit:
			hook = &fp.consumerAfterCommit
		case failpointPersisterBeforeCommit:
			hook = &fp.persisterBeforeCommit
		case failpointPersisterAfterCommit:
			hook = &fp.persisterAfterCommit
		case failpointExpirerAfterExpire:
			hook = &fp.expirerAfterExpire
		}
		if hook == nil || *hook != nil {
			return failpoints{}, fmt.Errorf("%s=%q: want a list of distinct %s, each optionally :PATH",
				failpointEnv, spec, strings.Join(failpointNames, ", "))
		}
		*hook = killer(log, one, trigger)
	}
	log.Warn("test failpoints armed: this process kills itself at one of them", "failpoints", spec)
	return fp, nil
}

// killer returns a hook that SIGKILLs the process the first time it runs while trigger exists
// (always, without a trigger), and does nothing after that.
func killer(log *slog.Logger, spec, trigger string) func() {
	var fired atomic.Bool
	return func() {
		if fired.Load() {
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
		fired.Store(true)
		log.Error("test failpoint: killing this process", "failpoint", spec)
		if p, err := os.FindProcess(os.Getpid()); err == nil {
			_ = p.Kill()
		}
		select {} // SIGKILL is on its way: commit nothing more
	}
}
