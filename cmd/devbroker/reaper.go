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
// Groups in other states are left alone: kfake's rebalance and pending-sync timers bound them,
// and a member legitimately waits there without sending anything. Groups are never forgotten:
// a development broker has a handful.
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
	// group. It is per group, not per member, because a member's first JoinGroup carries no
	// member id (kfake assigns it in the response, which a control function does not see).
	maxTimeout time.Duration
	// lastSeen holds, per member id, when the member last sent a request, or when a describe
	// first listed it: the clock only ever starts late, never early.
	lastSeen map[string]time.Time
}

// groupStable is the state, as DescribeGroups names it, of a group with no rebalance in progress:
// the only state in which kfake lets a dead member stay.
const groupStable = "Stable"

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
			w = &groupWatch{lastSeen: make(map[string]time.Time)}
			r.groups[req.Group] = w
		}
		w.maxTimeout = max(w.maxTimeout, millis(req.SessionTimeoutMillis), millis(req.RebalanceTimeoutMillis))
		r.touch(req.Group, req.MemberID, now)
	case *kmsg.SyncGroupRequest:
		r.touch(req.Group, req.MemberID, now)
	case *kmsg.HeartbeatRequest:
		r.touch(req.Group, req.MemberID, now)
	case *kmsg.OffsetCommitRequest:
		r.touch(req.Group, req.MemberID, now)
	case *kmsg.LeaveGroupRequest:
		if w := r.groups[req.Group]; w != nil {
			delete(w.lastSeen, req.MemberID) // v0-2
			for _, m := range req.Members {  // v3+
				delete(w.lastSeen, m.MemberID)
			}
		}
	}
}

// touch records that member of group was alive at now; r.mu must be held.
func (r *reaper) touch(group, member string, now time.Time) {
	if w := r.groups[group]; w != nil && member != "" {
		w.lastSeen[member] = now
	}
}

// silentMember is a member the reaper is about to remove.
type silentMember struct {
	kmsg.DescribeGroupsResponseGroupMember
	silentFor, limit time.Duration
}

// scan describes the watched groups and reaps their silent members.
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
		for _, m := range r.silentMembers(g, now) {
			if err := r.reap(ctx, g.Group, m); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// silentMembers brings the group's watch up to date with a describe taken just before now, and
// returns the members to reap.
func (r *reaper) silentMembers(g kmsg.DescribeGroupsResponseGroup, now time.Time) []silentMember {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.groups[g.Group]
	if w == nil {
		return nil
	}
	limit := silenceFactor * w.maxTimeout
	listed := make(map[string]bool, len(g.Members))
	var silent []silentMember
	for _, m := range g.Members {
		listed[m.MemberID] = true
		last, ok := w.lastSeen[m.MemberID]
		if !ok {
			w.lastSeen[m.MemberID] = now
			continue
		}
		if g.State == groupStable && now.Sub(last) > limit {
			silent = append(silent, silentMember{m, now.Sub(last), limit})
		}
	}
	// Forgetting a member whose first request raced this describe only restarts its clock later.
	for id := range w.lastSeen {
		if !listed[id] {
			delete(w.lastSeen, id)
		}
	}
	return silent
}

// reap removes m from group with a LeaveGroup in its name.
func (r *reaper) reap(ctx context.Context, group string, m silentMember) error {
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group = group
	req.MemberID = m.MemberID // v0-2
	leaver := kmsg.NewLeaveGroupRequestMember()
	leaver.MemberID = m.MemberID
	leaver.Reason = kmsg.StringPtr("devbroker reaper: no request from this member for too long")
	req.Members = []kmsg.LeaveGroupRequestMember{leaver} // v3+
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
	r.log.Warn("reaper: removed a silent consumer-group member that kfake would keep forever (real Kafka's session timeout evicts it)",
		"group", group, "member_id", m.MemberID, "client_id", m.ClientID, "client_host", m.ClientHost,
		"silent_for", m.silentFor.Round(time.Millisecond), "limit", m.limit)
	return nil
}

func millis(ms int32) time.Duration { return time.Duration(ms) * time.Millisecond }
