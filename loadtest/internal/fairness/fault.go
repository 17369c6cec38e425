package fairness

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/seckill-go/seckill-go/internal/waitroom/redisroom"
)

// The faults a waiting-room run can play while the crowd waits in line (-room-fault), each once
// per sale, -room-fault-at after the sale starts:
//
//	kill            replica 2 SIGKILLed (a crash) and started again -room-fault-for later: the
//	                room lives in Redis, so its visitors — who poll the next replica while it is
//	                gone — must keep their places, and the passes it signed must still buy
//	redis-failover  the Redis master that holds the sale's room SIGKILLed (Sentinel: the master;
//	                Cluster: the master of the room's slot); its replica is promoted, the killed
//	                node started again after the crowd. Replication is asynchronous: the joins
//	                answered in the last moment before the kill may be lost (their visitors join
//	                again, at the back); every other place and every pass must survive.
const (
	FaultKill          = "kill"
	FaultRedisFailover = "redis-failover"
)

// lossWindow is how long before a Redis master's SIGKILL a join may have been answered and yet
// not reached its replica: asynchronous replication on one machine copies a write within
// milliseconds; a second is the bound the judge allows, generously.
const lossWindow = time.Second

// killedReplica is the replica the kill fault crashes: one of three, neither the first nor the last.
const killedReplica = 2

// FaultJudgement is what a fault did to the room, and whether the room kept its promises across it.
type FaultJudgement struct {
	Kind   string    `json:"kind"`
	At     time.Time `json:"at"`
	Detail string    `json:"detail"`
	// Down is how long the fault took from the kill until the service was back: the replica
	// healthy again, or another Redis master serving the room.
	Down float64 `json:"down_seconds"`
	Err  string  `json:"error,omitempty"`
	// InLine are the visitors who held a place when the fault struck (their join answered, not
	// yet admitted); Kept those of them whose place never changed; Moved those told another
	// place later (joined again), by name: the old place and the new.
	InLine int      `json:"in_line"`
	Kept   int      `json:"kept"`
	Moved  []string `json:"moved,omitempty"`
	// MayMove are the visitors in line whose join was answered within lossWindow before a Redis
	// master's kill: their place may be lost. Rejoins counts every join after a not_joined.
	MayMove int `json:"may_move"`
	Rejoins int `json:"rejoins"`
	// Unanswered are the visitors who got no answer at least once (and moved to the next
	// replica): the fault's reach.
	Unanswered int `json:"unanswered"`
	// PassesAcross are the visitors admitted before the fault whose purchase, sent after it with
	// the pass they held, got past the pass check (202, or 409 sold out); PassesRefused those
	// refused 403 instead.
	PassesAcross  int      `json:"passes_across"`
	PassesRefused []string `json:"passes_refused,omitempty"`
	Passed        bool     `json:"passed"`
}

// roomFault plays one fault on the local stack: the scripts of make up.
type roomFault struct {
	kind     string
	down     time.Duration // kill: how long the replica stays down
	dsn      string
	services string // scripts/services.sh
	replicas string // scripts/replica.sh
	killed   string // the Redis node the failover killed, started again after the crowd
}

// validFault checks the -room-fault value.
func validFault(kind string) error {
	switch kind {
	case "", FaultKill, FaultRedisFailover:
		return nil
	}
	return fmt.Errorf("-room-fault: %q is neither %s nor %s", kind, FaultKill, FaultRedisFailover)
}

// play waits until at, strikes, and waits for the recovery; the judgement's Err says what failed.
func (f *roomFault) play(ctx context.Context, at time.Time, saleID func() string, say func(string, ...any)) FaultJudgement {
	sleep(ctx, time.Until(at))
	fj := FaultJudgement{Kind: f.kind, At: time.Now()}
	var err error
	switch f.kind {
	case FaultKill:
		err = f.killReplica(ctx, &fj)
	case FaultRedisFailover:
		err = f.failRedis(ctx, saleID(), &fj)
	}
	fj.Down = time.Since(fj.At).Seconds()
	if err != nil {
		fj.Err = err.Error()
	}
	say("fault %s: %s; back after %.1f s%s", f.kind, fj.Detail, fj.Down, map[bool]string{true: "", false: " — " + fj.Err}[err == nil])
	return fj
}

// killReplica SIGKILLs the replica and, f.down later, starts it again (replica.sh waits until
// it is healthy).
func (f *roomFault) killReplica(ctx context.Context, fj *FaultJudgement) error {
	n := strconv.Itoa(killedReplica)
	if err := f.run(ctx, f.replicas, "kill", n); err != nil {
		return err
	}
	sleep(ctx, f.down)
	fj.Detail = fmt.Sprintf("replica %s SIGKILLed, started again %s later", n, f.down)
	return f.run(ctx, f.replicas, "start", n)
}

// failRedis SIGKILLs the master serving the room's keys and waits until another serves them.
func (f *roomFault) failRedis(ctx context.Context, saleID string, fj *FaultJudgement) error {
	var who []string
	switch mode := os.Getenv("SECKILL_REDIS_MODE"); mode {
	case "sentinel":
		who = []string{"sentinel-master"}
	case "cluster":
		dsn, err := mysql.ParseDSN(f.dsn)
		if err != nil {
			return err
		}
		if saleID == "" {
			return fmt.Errorf("no visitor has joined yet: the room's slot is not known")
		}
		who = []string{"cluster-master", redisroom.KeysFor(dsn.DBName, saleID).Meta}
	default:
		return fmt.Errorf("a Redis failover needs a replicated Redis (make up REDIS_MODE=sentinel or cluster); SECKILL_REDIS_MODE is %q", mode)
	}
	name, err := f.output(ctx, f.services, who...)
	if err != nil {
		return err
	}
	if err := f.run(ctx, f.services, "kill", name); err != nil {
		return err
	}
	f.killed = name
	fj.Detail = name + " (the room's master) SIGKILLed"
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if now, err := f.output(ctx, f.services, who...); err == nil && now != name {
			fj.Detail += "; " + now + " took over"
			return nil
		}
		sleep(ctx, 100*time.Millisecond)
	}
	return fmt.Errorf("nobody took over from %s within a minute", name)
}

// afterCrowd starts the Redis node the failover killed again, as an operator would.
func (f *roomFault) afterCrowd(ctx context.Context, fj *FaultJudgement) {
	if f.killed == "" {
		return
	}
	if err := f.run(ctx, f.services, "start", f.killed); err != nil && fj.Err == "" {
		fj.Err = "starting " + f.killed + " again: " + err.Error()
		return
	}
	fj.Detail += "; " + f.killed + " started again after the crowd"
}

func (f *roomFault) run(ctx context.Context, script string, args ...string) error {
	out, err := exec.CommandContext(ctx, script, args...).CombinedOutput()
	if err != nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		return fmt.Errorf("%s %s: %w: %s", script, strings.Join(args, " "), err, strings.Join(lines[max(0, len(lines)-3):], " | "))
	}
	return nil
}

func (f *roomFault) output(ctx context.Context, script string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, script, args...).Output()
	name := strings.TrimSpace(string(out))
	if err == nil && name == "" {
		err = fmt.Errorf("printed nothing")
	}
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", script, strings.Join(args, " "), err)
	}
	return name, nil
}

// judgeFault reads what the visitors saw across the fault fj: places kept, places lost only where
// the fault may lose them, passes that still buy.
func judgeFault(visitors []*Visitor, fj FaultJudgement) FaultJudgement {
	for _, v := range visitors {
		fj.Rejoins += v.Rejoins
		if v.Unanswered > 0 {
			fj.Unanswered++
		}
		inLine := len(v.Tickets) > 0 && !v.FirstTicketAt.IsZero() && v.FirstTicketAt.Before(fj.At) &&
			(!v.Admitted() || v.AdmittedSeen.After(fj.At))
		if inLine {
			fj.InLine++
			mayMove := fj.Kind == FaultRedisFailover && v.FirstTicketAt.After(fj.At.Add(-lossWindow))
			if mayMove {
				fj.MayMove++
			}
			if len(v.Tickets) == 1 {
				fj.Kept++
			} else if !mayMove {
				fj.Moved = append(fj.Moved, fmt.Sprintf("%s: place %v", v.User, v.Tickets))
			}
		}
		if !v.Admitted() || !v.AdmittedSeen.Before(fj.At) {
			continue
		}
		for _, p := range v.Purchases {
			if p.Foul != "" || p.At.Before(fj.At) {
				continue
			}
			// A 202, or a 409 (sold out, the buyer's limit): the pass was taken; a 403 refused it.
			// Anything else (no answer, 429, 503) says nothing of the pass: the next one does.
			if p.Status == http.StatusAccepted || p.Status == http.StatusConflict {
				fj.PassesAcross++
				break
			}
			if p.Status == http.StatusForbidden {
				fj.PassesRefused = append(fj.PassesRefused, fmt.Sprintf("%s: 403 %s", v.User, p.Code))
				break
			}
		}
	}
	slices.Sort(fj.Moved)
	fj.Passed = fj.Err == "" && len(fj.Moved) == 0 && len(fj.PassesRefused) == 0 && fj.InLine > 0
	return fj
}
