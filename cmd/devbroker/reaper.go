package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	// reapInterval is how often the reaper describes the groups it watches.
	reapInterval = 2 * time.Second
	// silenceFactor times the longest session or rebalance timeout a group's members asked for is
	// how long a member may stay silent before it is reaped. A live member of a Stable group sends
	// a heartbeat well within its session timeout, and one parked in a JoinGroup sends nothing for
	// up to the rebalance timeout; twice the longer of the two leaves room for a slow machine.
	silenceFactor = 2
	// scanTimeout bounds one scan's requests to the in-process broker.
	scanTimeout = 10 * time.Second
)

// reaper removes the consumer-group members that kfake would otherwise keep forever. Real Kafka
// does not need it: its coordinator evicts every member whose session timeout expires.
//
// kfake (v0.0.0-20260918054303-01f206a7e32c, the version go.mod pins) arms a classic member's
// session timer only when it hands a reply to the member's connection (groups.go: reply calls
// updateHeartbeat). A member's first JoinGroup (kafka-go sends v1/v2 without a member id) parks
// with no timer: addMemberAndRebalance calls stopPending, which stops the member's only timer m.t.
// If the process is killed while the JoinGroup is parked, completeRebalance keeps the member (it
// still has a waitingReply) and replies to it; clientReq.reply races the connection's respCh,
// which has room, against its closed done channel, so about half the time it reports the
// connection dead and updateHeartbeat never runs. When another member leads (the previous leader
// keeps the role if it rejoins), its SyncGroup ends the rebalance and completeLeaderSync clears
// the pending-sync barrier and its timer. The dead member then keeps its partitions with no timer
// at all: they are not consumed again until some other membership change rebalances the group,
// which drops the member because it does not rejoin.
//
// The reaper watches, through a kfake control function that only observes, the requests that
// prove a member alive, and describes the groups every interval. A member of a Stable group that
// has sent nothing for silenceFactor times the group's longest timeout gets a LeaveGroup in its
// name, which kfake handles as an expired session would be: remove the member and rebalance.
// Groups are never forgotten: a development broker has a handful.
//
// The reaper also gives a rebalance the deadline real Kafka gives it. Kafka's coordinator waits
// for the members to rejoin at most the rebalance timeout from the start of the rebalance, then
// drops those that did not. kfake (groups.go: rebalance) restarts that wait at every JoinGroup
// ("Always reset the timer"), so while joins keep arriving less than the rebalance timeout
// apart, a member that does not rejoin holds the rebalance open for as long as they do. kafka-go
// gives up on its JoinGroup after its network timeout (a fixed 5 s) plus the rebalance timeout,
// then joins again, which is one more join: after a replica was SIGKILLed mid-stampede, a CI
// run's consumers kept each other joining this way past TestReplicaKilledMidStampede's deadline,
// and no order was made meanwhile. So a group seen in PreparingRebalance longer than its longest rebalance timeout
// since the first JoinGroup of the rebalance loses the members known before that JoinGroup that
// have not joined since, with a LeaveGroup in their names, as Kafka would drop them; kfake then
// completes the rebalance with the members that did join. A member dropped for being slow joins
// again, as a Kafka client its coordinator dropped does; a member that first joined during the
// rebalance is waiting by definition and is left alone.
type reaper struct {
	log      *slog.Logger
	client   *kgo.Client
	interval time.Duration

	mu     sync.Mutex
	groups map[string]*groupWatch // by group id
}

// groupWatch is what the reaper knows about one group.
type groupWatch struct {
	// maxTimeout is the longest session or rebalance timeout of any JoinGroup seen for the
	// group, maxRebalance the longest rebalance timeout. They are per group, not per member,
	// because a member's first JoinGroup carries no member id (kfake assigns it in the
	// response, which a control function does not see).
	maxTimeout, maxRebalance time.Duration
	// rebalanceFrom is when the reaper saw the first JoinGroup since it last saw a SyncGroup or
	// the group in a state other than PreparingRebalance (zero: none yet): the start of the
	// rebalance, or a moment after it (one begun by an expired session starts with the first
	// rejoin seen). A rebalance that ends with nobody syncing between two describes leaves it
	// at the older start: the members it spares then are those that joined since that start.
	rebalanceFrom time.Time
	// members holds what the reaper knows of each member id.
	members map[string]*memberWatch
}

// memberWatch is what the reaper knows about one member of a group. Every clock only ever starts
// late, never early.
type memberWatch struct {
	// known is when the reaper first saw the member: a request in its name, or a describe.
	known time.Time
	// lastSeen is when the member last sent a request, or when a describe first listed it.
	lastSeen time.Time
	// lastJoin is when the member last sent a JoinGroup in its own name (zero: never seen).
	lastJoin time.Time
}

// The states, as DescribeGroups names them, that the reaper acts in: Stable, a group with no
// rebalance in progress and the only state in which kfake lets a dead member stay; and
// PreparingRebalance, where kfake waits for the members to join.
const (
	groupStable    = "Stable"
	groupPreparing = "PreparingRebalance"
)

// newReaper starts observing cluster's group requests and returns a reaper that talks to the
// cluster over its first listener; call run to reap and close when done.
//
// Only groups that receive a JoinGroup after this call are watched: that is the only way a member
// without a session timer is born, and it tells the reaper how long the group's members may stay
// silent.
func newReaper(log *slog.Logger, cluster *kfake.Cluster, interval time.Duration) (*reaper, error) {
	if log == nil || cluster == nil {
		return nil, errors.New("reaper: needs a logger and a cluster")
	}
	if interval <= 0 {
		return nil, fmt.Errorf("reaper: interval %v: must be positive", interval)
	}
	addrs := cluster.ListenAddrs()
	if len(addrs) == 0 {
		return nil, errors.New("reaper: the cluster has no listener")
	}
	client, err := kgo.NewClient(kgo.SeedBrokers(addrs[0]), kgo.ClientID("devbroker-reaper"))
	if err != nil {
		return nil, fmt.Errorf("reaper: client: %w", err)
	}
	r := &reaper{log: log, client: client, interval: interval, groups: make(map[string]*groupWatch)}

	// A control function that returns handled=false only observes: kfake keeps it installed and
	// then handles the request as usual. kfake waits for it on its run loop, so it must not block.
	observe := func(req kmsg.Request) (kmsg.Response, error, bool) {
		r.observe(req, time.Now())
		return nil, nil, false
	}
	for _, key := range []kmsg.Key{kmsg.JoinGroup, kmsg.SyncGroup, kmsg.Heartbeat, kmsg.OffsetCommit, kmsg.LeaveGroup} {
		cluster.ControlKey(int16(key), observe)
	}
	return r, nil
}

// close closes the reaper's client. The observer stays installed in the cluster: kfake has no way
// to remove it from outside. It costs a map update per group request, and kfake keeps, for each
// control function, the last request of every connection that sent it one (controlCtx.lastReq):
// a few hundred bytes per coordinator connection ever opened, which a development broker affords.
func (r *reaper) close() { r.client.Close() }

// run scans every interval until ctx is done.
func (r *reaper) run(ctx context.Context) {
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sctx, cancel := context.WithTimeout(ctx, scanTimeout)
		err := r.scan(sctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			r.log.Warn("reaper: scan", "err", err)
		}
	}
}

// observe records the signs of life in one group request.
func (r *reaper) observe(req kmsg.Request, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch req := req.(type) {
	case *kmsg.JoinGroupRequest:
		w := r.groups[req.Group]
		if w == nil {
			w = &groupWatch{members: make(map[string]*memberWatch)}
			r.groups[req.Group] = w
		}
		w.maxTimeout = max(w.maxTimeout, millis(req.SessionTimeoutMillis), millis(req.RebalanceTimeoutMillis))
		w.maxRebalance = max(w.maxRebalance, millis(req.RebalanceTimeoutMillis))
		if w.rebalanceFrom.IsZero() {
			w.rebalanceFrom = now
		}
		if m := r.touch(req.Group, req.MemberID, now); m != nil {
			m.lastJoin = now
		}
	case *kmsg.SyncGroupRequest:
		// A SyncGroup comes after a rebalance's joins: the next JoinGroup starts a new one.
		if w := r.groups[req.Group]; w != nil {
			w.rebalanceFrom = time.Time{}
		}
		r.touch(req.Group, req.MemberID, now)
	case *kmsg.HeartbeatRequest:
		r.touch(req.Group, req.MemberID, now)
	case *kmsg.OffsetCommitRequest:
		r.touch(req.Group, req.MemberID, now)
	case *kmsg.LeaveGroupRequest:
		if w := r.groups[req.Group]; w != nil {
			delete(w.members, req.MemberID) // v0-2
			for _, m := range req.Members { // v3+
				delete(w.members, m.MemberID)
			}
		}
	}
}

// touch records that member of group was alive at now and returns what the reaper knows of it
// (nil: a group it does not watch, or no member id); r.mu must be held.
func (r *reaper) touch(group, member string, now time.Time) *memberWatch {
	w := r.groups[group]
	if w == nil || member == "" {
		return nil
	}
	m := w.members[member]
	if m == nil {
		m = &memberWatch{known: now}
		w.members[member] = m
	}
	m.lastSeen = now
	return m
}

// leaver is a member the reaper is about to remove, and why.
type leaver struct {
	kmsg.DescribeGroupsResponseGroupMember
	why string
	// waited is how long the member was silent, or how long the rebalance waited for it;
	// limit the bound it passed.
	waited, limit time.Duration
}

// scan describes the watched groups and removes their silent members, and the members that held a
// rebalance open past its deadline.
func (r *reaper) scan(ctx context.Context) error {
	r.mu.Lock()
	names := make([]string, 0, len(r.groups))
	for name := range r.groups {
		names = append(names, name)
	}
	r.mu.Unlock()
	if len(names) == 0 {
		return nil
	}

	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = names
	resp, err := req.RequestWith(ctx, r.client)
	if err != nil {
		return fmt.Errorf("describe groups: %w", err)
	}
	now := time.Now()
	var errs []error
	for _, g := range resp.Groups {
		if err := kerr.ErrorForCode(g.ErrorCode); err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
			errs = append(errs, fmt.Errorf("describe group %q: %w", g.Group, err))
			continue
		}
		for _, m := range r.leavers(g, now) {
			if err := r.reap(ctx, g.Group, m); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// leavers brings the group's watch up to date with a describe taken just before now, and returns
// the members to remove: in a Stable group, those silent for longer than silenceFactor times the
// group's longest timeout; in a group PreparingRebalance for longer than its longest rebalance
// timeout, those known before the rebalance began that have not joined since.
func (r *reaper) leavers(g kmsg.DescribeGroupsResponseGroup, now time.Time) []leaver {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.groups[g.Group]
	if w == nil {
		return nil
	}
	if g.State != groupPreparing {
		w.rebalanceFrom = time.Time{}
	}
	silenceLimit := silenceFactor * w.maxTimeout
	overdue := g.State == groupPreparing && !w.rebalanceFrom.IsZero() && now.Sub(w.rebalanceFrom) > w.maxRebalance
	listed := make(map[string]bool, len(g.Members))
	var out []leaver
	for _, dm := range g.Members {
		listed[dm.MemberID] = true
		m := w.members[dm.MemberID]
		if m == nil {
			w.members[dm.MemberID] = &memberWatch{known: now, lastSeen: now}
			continue
		}
		switch {
		case g.State == groupStable && now.Sub(m.lastSeen) > silenceLimit:
			out = append(out, leaver{dm, "no request from this member for too long (real Kafka's session timeout evicts it)",
				now.Sub(m.lastSeen), silenceLimit})
		case overdue && m.known.Before(w.rebalanceFrom) && m.lastJoin.Before(w.rebalanceFrom):
			out = append(out, leaver{dm, "did not rejoin within the rebalance timeout (real Kafka's coordinator drops it; kfake would wait as long as other members keep joining)",
				now.Sub(w.rebalanceFrom), w.maxRebalance})
		}
	}
	// Forgetting a member whose first request raced this describe only restarts its clocks later.
	for id := range w.members {
		if !listed[id] {
			delete(w.members, id)
		}
	}
	return out
}

// reap removes m from group with a LeaveGroup in its name.
func (r *reaper) reap(ctx context.Context, group string, m leaver) error {
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group = group
	req.MemberID = m.MemberID // v0-2
	member := kmsg.NewLeaveGroupRequestMember()
	member.MemberID = m.MemberID
	member.Reason = kmsg.StringPtr("devbroker reaper: " + m.why)
	req.Members = []kmsg.LeaveGroupRequestMember{member} // v3+
	resp, err := req.RequestWith(ctx, r.client)
	if err != nil {
		return fmt.Errorf("leave group %q for member %q: %w", group, m.MemberID, err)
	}
	code := resp.ErrorCode
	if code == 0 && len(resp.Members) > 0 {
		code = resp.Members[0].ErrorCode
	}
	if err := kerr.ErrorForCode(code); errors.Is(err, kerr.UnknownMemberID) {
		return nil // it left, or kfake evicted it, after the describe
	} else if err != nil {
		return fmt.Errorf("leave group %q for member %q: %w", group, m.MemberID, err)
	}
	r.log.Warn("reaper: removed a consumer-group member that kfake would keep", "why", m.why,
		"group", group, "member_id", m.MemberID, "client_id", m.ClientID, "client_host", m.ClientHost,
		"waited", m.waited.Round(time.Millisecond), "limit", m.limit)
	return nil
}

func millis(ms int32) time.Duration { return time.Duration(ms) * time.Millisecond }
