package app

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"
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
//	holder-kill               inside a lock strategy's critical section, with the lock (or the
//	                          row lock) held: a holder that dies holding it
//	holder-stall@DURATION     the same place, but the holder stalls for DURATION (a GC pause, a
//	                          swapped-out process) and then goes on as if nothing happened;
//	                          DURATION is a Go duration, 30s when left out
//
// each optionally followed by :PATH: the hook then fires at the first such point reached while
// the file PATH exists; the process that removes PATH is the one that fires it (dies, stalls), so
// of the processes armed with one PATH, one fires per file created. A process armed with a PATH
// that never appears behaves as if unarmed.
const failpointEnv = "SECKILL_TEST_FAILPOINT"

const (
	failpointConsumerAfterCommit   = "consumer-after-commit"
	failpointPersisterBeforeCommit = "persister-before-commit"
	failpointPersisterAfterCommit  = "persister-after-commit"
	failpointExpirerAfterExpire    = "expirer-after-expire"
	failpointHolderKill            = "holder-kill"
	failpointHolderStall           = "holder-stall"
)

var failpointNames = []string{failpointConsumerAfterCommit, failpointPersisterBeforeCommit, failpointPersisterAfterCommit, failpointExpirerAfterExpire, failpointHolderKill, failpointHolderStall + "@DURATION"}

// defaultStall is how long holder-stall stalls when its spec names no duration.
const defaultStall = 30 * time.Second

// failpoints are the test hooks set from failpointEnv; nil members are off.
type failpoints struct {
	// consumerAfterCommit runs between a batch's database commit and its offset commit.
	consumerAfterCommit func()
	// persisterBeforeCommit runs between a persister's stream read and its MySQL commit;
	// persisterAfterCommit between that commit and the entries' XACK+XDEL.
	persisterBeforeCommit, persisterAfterCommit func()
	// expirerAfterExpire runs between an expiry batch's commit and the return of its units.
	expirerAfterExpire func()
	// holderKill and holderStall run inside the critical section of every lock strategy.
	holderKill, holderStall func()
}

// holder is what runs inside a lock strategy's critical section: the holder-* hooks armed, or
// nil.
func (fp failpoints) holder() func() {
	if fp.holderKill == nil && fp.holderStall == nil {
		return nil
	}
	return func() {
		for _, h := range []func(){fp.holderStall, fp.holderKill} {
			if h != nil {
				h()
			}
		}
	}
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
		name, arg, hasArg := strings.Cut(name, "@")
		var hook *func()
		switch name {
		case failpointHolderKill:
			hook = &fp.holderKill
		case failpointHolderStall:
			hook = &fp.holderStall
		case failpointConsumerAfterCommit:
			hook = &fp.consumerAfterCommit
		case failpointPersisterBeforeCommit:
			hook = &fp.persisterBeforeCommit
		case failpointPersisterAfterCommit:
			hook = &fp.persisterAfterCommit
		case failpointExpirerAfterExpire:
			hook = &fp.expirerAfterExpire
		}
		if hook == nil || *hook != nil || (hasArg && name != failpointHolderStall) {
			return failpoints{}, fmt.Errorf("%s=%q: want a list of distinct %s, each optionally :PATH",
				failpointEnv, spec, strings.Join(failpointNames, ", "))
		}
		if name != failpointHolderStall {
			*hook = killer(log, one, trigger)
			continue
		}
		stall := defaultStall
		if hasArg {
			d, err := time.ParseDuration(arg)
			if err != nil || d <= 0 {
				return failpoints{}, fmt.Errorf("%s=%q: %s@%q is not a positive duration", failpointEnv, spec, name, arg)
			}
			stall = d
		}
		*hook = staller(log, one, trigger, stall)
	}
	log.Warn("test failpoints armed: this process kills itself at one of them", "failpoints", spec)
	return fp, nil
}

// fire reports whether a hook armed with trigger fires now: always without a trigger, else when
// this process is the one that removes the file.
func fire(log *slog.Logger, trigger string) bool {
	if trigger == "" {
		return true
	}
	if err := os.Remove(trigger); err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			log.Warn("failpoint trigger", "path", trigger, "err", err)
		}
		return false
	}
	return true
}

// staller returns a hook that sleeps for d, ignoring everything else, each time its trigger
// appears (every time it runs, without a trigger).
func staller(log *slog.Logger, spec, trigger string, d time.Duration) func() {
	return func() {
		if !fire(log, trigger) {
			return
		}
		log.Error("test failpoint: this process stalls", "failpoint", spec, "for", d)
		time.Sleep(d)
		log.Error("test failpoint: the stall is over", "failpoint", spec)
	}
}

// killer returns a hook that SIGKILLs the process the first time it runs while trigger exists
// (always, without a trigger), and does nothing after that.
func killer(log *slog.Logger, spec, trigger string) func() {
	var fired atomic.Bool
	return func() {
		if fired.Load() || !fire(log, trigger) {
			return
		}
		fired.Store(true)
		log.Error("test failpoint: killing this process", "failpoint", spec)
		if p, err := os.FindProcess(os.Getpid()); err == nil {
			_ = p.Kill()
		}
		select {} // SIGKILL is on its way: commit nothing more
	}
}
