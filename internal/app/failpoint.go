package app

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
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
//	holder-pause@DURATION     the same place, but the whole process stops (SIGSTOP) for
//	                          DURATION, its lease renewals and heartbeats too, and then goes on as
//	                          if nothing happened: the stop-the-world GC pause or swapped-out VM
//	                          of the fencing-token argument; DURATION is a Go duration, 10s when
//	                          left out
//	holder-hold@DURATION      the same place, but only the holder waits there, for DURATION
//	                          (2s when left out), while the process goes on: a slow critical
//	                          section, during which the lock zoo restarts the servers the lock
//	                          lives on (Redlock's, Memcached)
//
// each optionally followed by :PATH: the hook then fires at the first such point reached while
// the file PATH exists; the process that removes PATH is the one that fires it (dies, pauses), so
// of the processes armed with one PATH, one fires per file created. A process armed with a PATH
// that never appears behaves as if unarmed. The holder-* hooks also fire on PATH.STRATEGY (say
// .run/zoo/holder-kill.zk-herd), in a critical section of that strategy only.
const failpointEnv = "SECKILL_TEST_FAILPOINT"

const (
	failpointConsumerAfterCommit   = "consumer-after-commit"
	failpointPersisterBeforeCommit = "persister-before-commit"
	failpointPersisterAfterCommit  = "persister-after-commit"
	failpointExpirerAfterExpire    = "expirer-after-expire"
	failpointHolderKill            = "holder-kill"
	failpointHolderPause           = "holder-pause"
	failpointHolderHold            = "holder-hold"
)

var failpointNames = []string{failpointConsumerAfterCommit, failpointPersisterBeforeCommit, failpointPersisterAfterCommit, failpointExpirerAfterExpire, failpointHolderKill, failpointHolderPause + "@DURATION", failpointHolderHold + "@DURATION"}

// defaultPause is how long holder-pause stops the process when its spec names no duration;
// defaultHold how long holder-hold keeps its holder.
const (
	defaultPause = 10 * time.Second
	defaultHold  = 2 * time.Second
)

// failpoints are the test hooks set from failpointEnv; nil members are off.
type failpoints struct {
	// consumerAfterCommit runs between a batch's database commit and its offset commit.
	consumerAfterCommit func()
	// persisterBeforeCommit runs between a persister's stream read and its MySQL commit;
	// persisterAfterCommit between that commit and the entries' XACK+XDEL.
	persisterBeforeCommit, persisterAfterCommit func()
	// expirerAfterExpire runs between an expiry batch's commit and the return of its units.
	expirerAfterExpire func()
	// holderKill, holderPause and holderHold run inside the critical section of every lock
	// strategy, told which strategy it is.
	holderKill, holderPause, holderHold func(strategy string)
}

// holder is what runs inside a lock strategy's critical section: the holder-* hooks armed, or
// nil.
func (fp failpoints) holder() func(strategy string) {
	if fp.holderKill == nil && fp.holderPause == nil && fp.holderHold == nil {
		return nil
	}
	return func(strategy string) {
		for _, h := range []func(string){fp.holderHold, fp.holderPause, fp.holderKill} {
			if h != nil {
				h(strategy)
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
		if name == failpointHolderKill || name == failpointHolderPause || name == failpointHolderHold {
			if err := fp.armHolder(log, one, name, arg, hasArg, trigger); err != nil {
				return failpoints{}, fmt.Errorf("%s=%q: %w", failpointEnv, spec, err)
			}
			continue
		}
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
		if hook == nil || *hook != nil || hasArg {
			return failpoints{}, fmt.Errorf("%s=%q: %w", failpointEnv, spec, errFailpointSpec)
		}
		*hook = killer(log, one, trigger)
	}
	log.Warn("test failpoints armed: this process kills itself at one of them", "failpoints", spec)
	return fp, nil
}

var errFailpointSpec = fmt.Errorf("want a list of distinct %s, each optionally :PATH", strings.Join(failpointNames, ", "))

// armHolder sets the holder-* hook name.
func (fp *failpoints) armHolder(log *slog.Logger, spec, name, arg string, hasArg bool, trigger string) error {
	if name == failpointHolderKill {
		if fp.holderKill != nil || hasArg {
			return errFailpointSpec
		}
		var fired atomic.Bool
		kill := killer(log, spec, "")
		fp.holderKill = func(strategy string) {
			if !fired.Load() && fireFor(log, trigger, strategy) {
				fired.Store(true)
				kill()
			}
		}
		return nil
	}
	hook, d := &fp.holderPause, defaultPause
	if name == failpointHolderHold {
		hook, d = &fp.holderHold, defaultHold
	}
	if *hook != nil {
		return errFailpointSpec
	}
	if hasArg {
		var err error
		if d, err = time.ParseDuration(arg); err != nil || d <= 0 {
			return fmt.Errorf("%s@%q is not a positive duration", name, arg)
		}
	}
	if name == failpointHolderHold {
		*hook = func(strategy string) {
			if fireFor(log, trigger, strategy) {
				log.Error("test failpoint: the lock holder waits in its critical section", "failpoint", spec, "strategy", strategy, "for", d)
				time.Sleep(d)
			}
		}
		return nil
	}
	*hook = func(strategy string) {
		if fireFor(log, trigger, strategy) {
			log.Error("test failpoint: this process stops", "failpoint", spec, "strategy", strategy, "for", d)
			pauseProcess(log, d)
			log.Error("test failpoint: the process goes on", "failpoint", spec, "strategy", strategy)
		}
	}
	return nil
}

// fireFor is fire for the holder-* hooks: trigger.STRATEGY fires in strategy's critical
// sections only, trigger in any.
func fireFor(log *slog.Logger, trigger, strategy string) bool {
	if trigger == "" {
		return true
	}
	if _, err := os.Stat(trigger + "." + strategy); err == nil && fire(log, trigger+"."+strategy) {
		return true
	}
	if _, err := os.Stat(trigger); err == nil {
		return fire(log, trigger)
	}
	return false
}

// pauseProcess stops the whole process for d, as a stop-the-world pause does: a child shell
// sends it SIGSTOP, sleeps d and sends SIGCONT, while the calling goroutine waits for the child.
// Every goroutine stops, the lease renewals and session heartbeats too, which a sleep in one
// goroutine would not do; and the holder stays in its critical section for d even if the stop
// came late.
func pauseProcess(log *slog.Logger, d time.Duration) {
	pid := os.Getpid()
	pause := exec.Command("/bin/sh", "-c", fmt.Sprintf("kill -STOP %d; sleep %.3f; kill -CONT %d", pid, d.Seconds(), pid))
	if err := pause.Run(); err != nil {
		log.Error("test failpoint: the pause failed; sleeping instead", "err", err)
		time.Sleep(d)
	}
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
