package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	testTopic      = "seckill.orders"
	testPartitions = 6
	testGroup      = "seckill-orders"

	// The live member A in the zombie tests: a kafka-go reader with short timeouts, so that a
	// reaper bound (silenceFactor × 2 s) fits a quick test.
	liveSession   = 2 * time.Second
	liveHeartbeat = 200 * time.Millisecond
	// deadSession is the session and rebalance timeout of the member that dies joining: short,
	// so that a trial in which kfake does arm its timer ends quickly.
	deadSession = 500 * time.Millisecond
	// testReapInterval is how often the tests' reapers scan: 20 times as often as run's, which
	// gives a reaper more chances to remove a live member by mistake.
	testReapInterval = 100 * time.Millisecond
	// maxTrials bounds the tries for a member that kfake keeps without a session timer. Each
	// try is a coin flip inside kfake (see the reaper's doc comment), so 20 fail together once
	// in a million runs; a try takes about a second.
	maxTrials = 20
)

// TestKfakeKeepsMemberThatDiedJoining reproduces the bug the reaper works around: with no reaper,
// a member whose process died while its JoinGroup was parked stays in the group, with its
// partitions, long after its session timeout. If this test fails after a kfake upgrade, kfake
// has fixed the bug and the reaper can go.
func TestKfakeKeepsMemberThatDiedJoining(t *testing.T) {
	t.Parallel()
	_, addr := newTestCluster(t)
	admin := newAdmin(t, addr)
	newGroupReader(t, addr, liveSession, liveSession, liveHeartbeat)
	var live, zombie string
	for trial := 1; zombie == ""; trial++ {
		if trial > maxTrials {
			t.Fatalf("no member outlived its session timeout in %d trials", maxTrials)
		}
		live = waitAlone(t, admin)
		dead, stableAt := joinAndDie(t, admin, addr, fmt.Sprintf("dead-%d", trial))
		// kfake arms the session timer, if it does, when the rebalance completes: the member
		// is gone by then plus its session timeout unless it has no timer.
		gone := pollUntil(stableAt.Add(3*deadSession), func() bool { return !isMember(t, admin, dead) })
		if !gone {
			zombie = dead
			t.Logf("trial %d: member %s outlived its session timeout (%v)", trial, dead, deadSession)
			break
		}
		t.Logf("trial %d: kfake evicted %s after its session timeout; trying again", trial, dead)
	}

	// Long after its session timeout the dead member is still there, holding partitions that
	// nobody consumes.
	hold := 20 * deadSession
	var owned map[string][]int32
	for deadline := time.Now().Add(hold); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		g := describe(t, admin)
		owned = assignments(t, g)
		if g.State != "Stable" || !isMemberOf(g, zombie) {
			t.Fatalf("group %s with members %v: the dead member %s is gone", g.State, memberIDs(g), zombie)
		}
		if len(owned[zombie]) == 0 || len(owned[live]) == testPartitions {
			t.Fatalf("assignments %v: want the dead member %s to hold partitions", owned, zombie)
		}
	}
	t.Logf("%v later (%d× its session timeout) the dead member still holds partitions %v; the live one has %v",
		hold, hold/deadSession, owned[zombie], owned[live])
}

// TestReaperRemovesMemberThatDiedJoining shows the reaper removing such a member within its bound,
// and the live member then owning every partition.
func TestReaperRemovesMemberThatDiedJoining(t *testing.T) {
	t.Parallel()
	cluster, addr := newTestCluster(t)
	reaps := startReaper(t, cluster, testReapInterval)
	admin := newAdmin(t, addr)
	newGroupReader(t, addr, liveSession, liveSession, liveHeartbeat)
	waitAlone(t, admin)

	// The reaper waits silenceFactor × the group's longest timeout (the live member's), counted
	// from when it first saw the dead member, then for its next scan.
	limit := silenceFactor*liveSession + testReapInterval + 3*time.Second
	for trial := 1; len(reaps.members()) == 0; trial++ {
		if trial > maxTrials {
			t.Fatalf("no member needed reaping in %d trials", maxTrials)
		}
		joined := time.Now()
		dead, _ := joinAndDie(t, admin, addr, fmt.Sprintf("dead-%d", trial))
		if !pollUntil(joined.Add(limit), func() bool { return !isMember(t, admin, dead) }) {
			t.Fatalf("trial %d: dead member %s still in the group %v after it joined", trial, dead, limit)
		}
		removedAfter := time.Since(joined)
		waitAlone(t, admin)
		by := "kfake's session timer"
		if slices.Contains(reaps.members(), dead) {
			by = "the reaper"
		}
		t.Logf("trial %d: %s removed %s %v after it joined; the live member owns all %d partitions",
			trial, by, dead, removedAfter.Round(time.Millisecond), testPartitions)
	}
}

// TestReaperKeepsLiveMembers runs three idle readers configured like the app's consumer for longer
// than the reaper's bound: none may be reaped, and the group must not rebalance at all.
func TestReaperKeepsLiveMembers(t *testing.T) {
	t.Parallel()
	cluster, addr := newTestCluster(t)
	var (
		mu          sync.Mutex
		watching    bool
		joins       int
		generations = map[int32]bool{}
	)
	cluster.ControlKey(int16(kmsg.JoinGroup), func(kmsg.Request) (kmsg.Response, error, bool) {
		mu.Lock()
		defer mu.Unlock()
		if watching {
			joins++
		}
		return nil, nil, false
	})
	cluster.ControlKey(int16(kmsg.Heartbeat), func(req kmsg.Request) (kmsg.Response, error, bool) {
		mu.Lock()
		defer mu.Unlock()
		if watching {
			generations[req.(*kmsg.HeartbeatRequest).Generation] = true
		}
		return nil, nil, false
	})
	reaps := startReaper(t, cluster, testReapInterval)
	admin := newAdmin(t, addr)

	// The app's consumer settings (internal/orderqueue/consumer.go).
	const readers = 3
	for range readers {
		newGroupReader(t, addr, 10*time.Second, 10*time.Second, 2*time.Second)
	}
	var want []string
	if !pollUntil(time.Now().Add(30*time.Second), func() bool {
		g := describe(t, admin)
		owned := assignments(t, g)
		want = memberIDs(g)
		return g.State == "Stable" && len(owned) == readers && !slices.ContainsFunc(want, func(id string) bool { return len(owned[id]) == 0 })
	}) {
		t.Fatal("the readers did not settle into one Stable generation")
	}
	mu.Lock()
	watching = true
	mu.Unlock()

	hold := 30 * time.Second // the reaper's bound for these members is 2 × 10 s
	deadline := time.Now().Add(hold)
	for time.Now().Before(deadline) {
		g := describe(t, admin)
		if got := memberIDs(g); g.State != "Stable" || !slices.Equal(got, want) {
			t.Fatalf("group %s with members %v, want Stable with %v", g.State, got, want)
		}
		time.Sleep(500 * time.Millisecond)
	}

	mu.Lock()
	defer mu.Unlock()
	if joins != 0 || len(generations) != 1 {
		t.Errorf("over %v: %d JoinGroups and heartbeats in generations %v, want none and one generation", hold, joins, generations)
	}
	if got := reaps.members(); len(got) != 0 {
		t.Errorf("reaped %v, want no live member reaped", got)
	}
	t.Logf("over %v: %d members, heartbeats in generations %v, no JoinGroup, nothing reaped", hold, readers, generations)
}

// newTestCluster starts an in-memory broker on a free 127.0.0.1 port with the app's topic.
func newTestCluster(t testing.TB) (*kfake.Cluster, string) {
	t.Helper()
	c, err := kfake.NewCluster(
		kfake.Ports(0),
		kfake.SeedTopics(testPartitions, testTopic),
		kfake.GroupMinSessionTimeout(100*time.Millisecond), // kfake's default minimum is 6 s
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, c.ListenAddrs()[0]
}

// startReaper runs a reaper on cluster until the test ends and returns what it reaps.
func startReaper(t testing.TB, cluster *kfake.Cluster, interval time.Duration) *reapLog {
	t.Helper()
	reaps := &reapLog{t: t}
	r, err := newReaper(slog.New(reaps), cluster, interval)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { r.run(ctx) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		r.close()
	})
	return reaps
}

// newAdmin returns a franz-go client for describing the group.
func newAdmin(t testing.TB, addr string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// newGroupReader starts a kafka-go reader in the test group, the client the app uses; it joins at
// once and heartbeats until the test ends.
func newGroupReader(t testing.TB, addr string, session, rebalance, heartbeat time.Duration) {
	t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:           []string{addr},
		GroupID:           testGroup,
		Topic:             testTopic,
		SessionTimeout:    session,
		RebalanceTimeout:  rebalance,
		HeartbeatInterval: heartbeat,
		JoinGroupBackoff:  100 * time.Millisecond,
		// A reader rejoins only after its in-flight fetches return: keep them short, as the app does.
		MaxWait: 500 * time.Millisecond,
	})
	t.Cleanup(func() { _ = r.Close() })
}

// joinAndDie sends a first JoinGroup the way kafka-go does (v2, no member id) on a connection it
// closes at once, like a replica SIGKILLed while joining. It waits for the rebalance to complete
// with the dead member in the group, and returns the member's id and when that was seen.
func joinAndDie(t testing.TB, admin *kgo.Client, addr, clientID string) (string, time.Time) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	req := firstJoinRequest(deadSession, deadSession)
	// kfake reads the whole request before it sees the connection close.
	if _, err := conn.Write(kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID)).AppendRequest(nil, req, 1)); err != nil {
		t.Fatal(err)
	}
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}

	// It stays a member at least its session timeout after the rebalance completes.
	var dead string
	if !pollUntil(time.Now().Add(10*time.Second), func() bool {
		g := describe(t, admin)
		dead = ""
		for _, m := range g.Members {
			if m.ClientID == clientID {
				dead = m.MemberID
			}
		}
		return g.State == "Stable" && dead != ""
	}) {
		t.Fatalf("the member %q that died joining never showed up in a Stable group", clientID)
	}
	return dead, time.Now()
}

// waitAlone waits until the group is Stable with one member that owns every partition, and returns
// that member's id.
func waitAlone(t testing.TB, admin *kgo.Client) string {
	t.Helper()
	var g kmsg.DescribeGroupsResponseGroup
	if !pollUntil(time.Now().Add(10*time.Second), func() bool {
		g = describe(t, admin)
		return g.State == "Stable" && len(g.Members) == 1 && len(assignments(t, g)[g.Members[0].MemberID]) == testPartitions
	}) {
		t.Fatalf("group %s with assignments %v: want one member owning all %d partitions", g.State, assignments(t, g), testPartitions)
	}
	return g.Members[0].MemberID
}

func describe(t testing.TB, admin *kgo.Client) kmsg.DescribeGroupsResponseGroup {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{testGroup}
	resp, err := req.RequestWith(ctx, admin)
	if err != nil {
		t.Fatalf("describe group: %v", err)
	}
	return resp.Groups[0]
}

func isMember(t testing.TB, admin *kgo.Client, memberID string) bool {
	t.Helper()
	return isMemberOf(describe(t, admin), memberID)
}

func isMemberOf(g kmsg.DescribeGroupsResponseGroup, memberID string) bool {
	return slices.Contains(memberIDs(g), memberID)
}

// memberIDs returns the group's member ids, sorted.
func memberIDs(g kmsg.DescribeGroupsResponseGroup) []string {
	ids := make([]string, 0, len(g.Members))
	for _, m := range g.Members {
		ids = append(ids, m.MemberID)
	}
	slices.Sort(ids)
	return ids
}

// assignments returns the partitions of the test topic each member owns; kfake fills them in
// only while the group is Stable.
func assignments(t testing.TB, g kmsg.DescribeGroupsResponseGroup) map[string][]int32 {
	t.Helper()
	owned := make(map[string][]int32, len(g.Members))
	for _, m := range g.Members {
		if len(m.MemberAssignment) == 0 {
			continue
		}
		var a kmsg.ConsumerMemberAssignment
		if err := a.ReadFrom(m.MemberAssignment); err != nil {
			t.Fatalf("member %s: assignment: %v", m.MemberID, err)
		}
		for _, topic := range a.Topics {
			if topic.Topic == testTopic {
				owned[m.MemberID] = append(owned[m.MemberID], topic.Partitions...)
			}
		}
	}
	return owned
}

// pollUntil reports whether cond became true before deadline, checking every 20 ms.
func pollUntil(deadline time.Time, cond func() bool) bool {
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// reapLog is a slog handler that passes the reaper's logs to the test log and records the member
// ids it reports removing.
type reapLog struct {
	t      testing.TB
	mu     sync.Mutex
	reaped []string
}

func (*reapLog) Enabled(context.Context, slog.Level) bool { return true }

func (l *reapLog) Handle(_ context.Context, r slog.Record) error {
	line := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool {
		line += " " + a.String()
		if a.Key == "member_id" {
			l.mu.Lock()
			l.reaped = append(l.reaped, a.Value.String())
			l.mu.Unlock()
		}
		return true
	})
	l.t.Log(line)
	return nil
}

func (l *reapLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *reapLog) WithGroup(string) slog.Handler      { return l }

func (l *reapLog) members() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.reaped)
}

// The rebalance-deadline tests: a member that joined and synced, then went quiet (a session long
// enough to outlast the test), and a storm of first JoinGroups, one every stormEvery, each from
// a new member, with a rebalance timeout of stormRebalance (longer than stormEvery: every join
// lands before kfake's timer fires, as the consumers' staggered rejoins did).
const (
	quietSession   = time.Minute
	stormRebalance = 1500 * time.Millisecond
	stormEvery     = 500 * time.Millisecond
	stormFor       = 8 * time.Second
)

// TestKfakeStretchesARebalanceWhileJoinsArrive reproduces what the reaper's rebalance deadline
// works around: with no reaper, kfake answers no JoinGroup while new ones keep arriving inside the
// rebalance timeout and one member does not rejoin, however long that lasts (real Kafka answers
// them all one rebalance timeout after the rebalance began). If this test fails after a kfake
// upgrade, kfake has fixed it and the deadline can go.
func TestKfakeStretchesARebalanceWhileJoinsArrive(t *testing.T) {
	t.Parallel()
	_, addr := newTestCluster(t)
	joinQuietMember(t, addr)
	first, end := joinStorm(t, addr)
	select {
	case ans := <-first:
		t.Fatalf("the storm's first join was answered %v after it was sent (error %v), before the storm ended: kfake no longer restarts its rebalance timer at every join",
			ans.after.Round(time.Millisecond), ans.err)
	default:
	}
	// Once the joins stop, kfake's timer runs out and the rebalance completes: the test saw the
	// stretching, not some other failure.
	select {
	case ans := <-first:
		if ans.err != nil {
			t.Fatalf("the storm's first join: %v", ans.err)
		}
		t.Logf("the storm's first join was answered %v after it was sent, %v after the storm's last join",
			ans.after.Round(time.Millisecond), time.Since(end).Round(time.Millisecond))
	case <-time.After(stormRebalance + 10*time.Second):
		t.Fatal("the storm's first join was never answered, even after the storm ended")
	}
}

// TestReaperEndsARebalanceAtItsDeadline shows the reaper giving the rebalance real Kafka's
// deadline: the member that does not rejoin is dropped, and the joins are answered while the
// storm still goes on.
func TestReaperEndsARebalanceAtItsDeadline(t *testing.T) {
	t.Parallel()
	cluster, addr := newTestCluster(t)
	reaps := startReaper(t, cluster, testReapInterval)
	quiet := joinQuietMember(t, addr)
	first, _ := joinStorm(t, addr)
	select {
	case ans := <-first:
		if ans.err != nil {
			t.Fatalf("the storm's first join: %v", ans.err)
		}
		t.Logf("the storm's first join was answered %v after it was sent, during the storm (rebalance timeout %v)",
			ans.after.Round(time.Millisecond), stormRebalance)
	default:
		t.Fatalf("the storm's first join was not answered while the storm lasted (%v; rebalance timeout %v)", stormFor, stormRebalance)
	}
	if !slices.Contains(reaps.members(), quiet) {
		t.Fatalf("the reaper removed %v, want the member that did not rejoin, %s", reaps.members(), quiet)
	}
}

// joinAnswer is a JoinGroup's answer and how long after the request it came.
type joinAnswer struct {
	resp  *kmsg.JoinGroupResponse
	err   error
	after time.Duration
}

// rawJoin sends a first JoinGroup the way kafka-go does (v2, no member id) on a connection of its
// own, kept open until the test ends, and returns where its answer will arrive.
func rawJoin(t testing.TB, addr, clientID string, session, rebalance time.Duration) <-chan joinAnswer {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	req := firstJoinRequest(session, rebalance)
	sent := time.Now()
	if _, err := conn.Write(kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID)).AppendRequest(nil, req, 1)); err != nil {
		t.Fatal(err)
	}
	out := make(chan joinAnswer, 1)
	go func() {
		resp := kmsg.NewPtrJoinGroupResponse()
		resp.Version = req.Version
		err := readResponse(conn, resp)
		out <- joinAnswer{resp, err, time.Since(sent)}
	}()
	return out
}

// firstJoinRequest is a member's first JoinGroup to the test group as kafka-go sends it: v2, no
// member id, the range balancer first.
func firstJoinRequest(session, rebalance time.Duration) *kmsg.JoinGroupRequest {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{testTopic}
	protocol := kmsg.NewJoinGroupRequestProtocol()
	protocol.Name = "range" // kafka-go's first balancer
	protocol.Metadata = meta.AppendTo(nil)
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version = 2
	req.Group = testGroup
	req.SessionTimeoutMillis = int32(session.Milliseconds())
	req.RebalanceTimeoutMillis = int32(rebalance.Milliseconds())
	req.ProtocolType = "consumer"
	req.Protocols = []kmsg.JoinGroupRequestProtocol{protocol}
	return req
}

// readResponse reads one non-flexible response from conn into resp: its size, its correlation id,
// its body.
func readResponse(conn net.Conn, resp kmsg.Response) error {
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		return err
	}
	buf := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(conn, buf); err != nil {
		return err
	}
	if len(buf) < 4 {
		return fmt.Errorf("a response of %d bytes", len(buf))
	}
	return resp.ReadFrom(buf[4:])
}

// joinQuietMember joins the empty test group as its only member and leader, syncs, and from then
// on says nothing (its session outlasts the test). It returns the member's id once the group is
// Stable.
func joinQuietMember(t testing.TB, addr string) string {
	t.Helper()
	ans := <-rawJoin(t, addr, "quiet", quietSession, stormRebalance)
	if ans.err == nil {
		ans.err = kerr.ErrorForCode(ans.resp.ErrorCode)
	}
	if ans.err != nil {
		t.Fatalf("the quiet member's join: %v", ans.err)
	}
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	assignment := kmsg.NewConsumerMemberAssignment()
	owned := kmsg.NewConsumerMemberAssignmentTopic()
	owned.Topic = testTopic
	for p := range int32(testPartitions) {
		owned.Partitions = append(owned.Partitions, p)
	}
	assignment.Topics = []kmsg.ConsumerMemberAssignmentTopic{owned}
	plan := kmsg.NewSyncGroupRequestGroupAssignment()
	plan.MemberID = ans.resp.MemberID
	plan.MemberAssignment = assignment.AppendTo(nil)
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Version = 1
	sync.Group = testGroup
	sync.Generation = ans.resp.Generation
	sync.MemberID = ans.resp.MemberID
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{plan}
	if _, err := conn.Write(kmsg.NewRequestFormatter(kmsg.FormatterClientID("quiet")).AppendRequest(nil, sync, 2)); err != nil {
		t.Fatal(err)
	}
	synced := kmsg.NewPtrSyncGroupResponse()
	synced.Version = sync.Version
	if err := readResponse(conn, synced); err != nil {
		t.Fatalf("the quiet member's sync: %v", err)
	}
	if err := kerr.ErrorForCode(synced.ErrorCode); err != nil {
		t.Fatalf("the quiet member's sync: %v", err)
	}
	admin := newAdmin(t, addr)
	if !pollUntil(time.Now().Add(10*time.Second), func() bool {
		g := describe(t, admin)
		return g.State == "Stable" && isMemberOf(g, ans.resp.MemberID)
	}) {
		t.Fatalf("the group never became Stable with the quiet member %s", ans.resp.MemberID)
	}
	return ans.resp.MemberID
}

// joinStorm sends a first JoinGroup from a new member every stormEvery for stormFor, and returns
// where the first one's answer will arrive and when the last was sent.
func joinStorm(t testing.TB, addr string) (<-chan joinAnswer, time.Time) {
	t.Helper()
	first := rawJoin(t, addr, "storm-0", quietSession, stormRebalance)
	end := time.Now().Add(stormFor)
	for i := 1; time.Now().Before(end); i++ {
		time.Sleep(stormEvery)
		rawJoin(t, addr, fmt.Sprintf("storm-%d", i), quietSession, stormRebalance)
	}
	return first, time.Now()
}
