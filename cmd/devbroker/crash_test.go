package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// childEnv makes the test binary a devbroker (see TestMain): "fixed" runs run as the command does,
// "raw" runs it without persistAutoCreated, which is kfake on its own.
const childEnv = "DEVBROKER_TEST_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "":
		os.Exit(m.Run())
	case "raw":
		persistAutoCreatedTopics = false
	}
	// The child's stdout is the test's pipe; it ends on SIGKILL, which is the point.
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "devbroker:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// crashTopic is a topic no -topics seeds: the first client that names it creates it, through a
// metadata request, as kafka-go's ReadPartitions and its Writer do.
const crashTopic = "seckill.orders.lifecycle"

// TestAutoCreatedTopicSurvivesCrash: a topic created by a metadata request, written to, the
// broker SIGKILLed and started again from its data dir, written to again — every message ever
// acknowledged reads back, in order, from every partition, and a group's committed offsets still
// point into the log. kfake alone writes such a topic's name only at a clean shutdown: after a
// crash the topic came back empty, new batches were appended to the old segment files at
// positions kfake did not know ("unsupported magic byte" when read) and committed offsets lay past
// the end ("Offset Out Of Range"). That broke the dev broker after make chaos's broker-kill.
func TestAutoCreatedTopicSurvivesCrash(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts brokers as processes")
	}
	lost, err := crashAndRead(t, "fixed")
	if err != nil {
		t.Fatal(err)
	}
	if lost != 0 {
		t.Fatalf("%d acknowledged messages did not read back after the crash", lost)
	}
}

// TestKfakeLosesAutoCreatedTopicOnCrash is the negative control: the same crash on kfake without
// the wrapper's fix loses or garbles what it acknowledged. If this fails after a kfake upgrade,
// kfake persists auto-created topics itself and persistAutoCreated can go.
func TestKfakeLosesAutoCreatedTopicOnCrash(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts brokers as processes")
	}
	lost, err := crashAndRead(t, "raw")
	if err == nil && lost == 0 {
		t.Fatal("kfake alone kept an auto-created topic across a crash: the wrapper's fix may be obsolete")
	}
	t.Logf("kfake alone, as expected: %d lost, read error: %v", lost, err)
}

// crashAndRead writes keyed messages to crashTopic and SIGKILLs the broker while a writer is
// still writing (after a group committed its offsets over what it had read), starts it again from
// its data dir, writes a second round, and reads every partition back from its start. It returns
// how many acknowledged messages did not read back, and the first error of the read (a garbled
// batch, a committed offset out of range).
func crashAndRead(t *testing.T, mode string) (lost int, err error) {
	t.Helper()
	dir := t.TempDir()
	const perRound = 300
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	addr, kill := startChild(t, mode, dir, "")
	if _, err := produce(ctx, addr, 0, perRound); err != nil {
		kill()
		return 0, fmt.Errorf("first round: %w", err)
	}
	if err := commitAll(ctx, addr); err != nil {
		kill()
		return 0, fmt.Errorf("commit: %w", err)
	}
	// Kill the broker mid-write: a writer keeps writing past the first round.
	midway := make(chan int)
	go func() {
		acked, _ := produce(ctx, addr, perRound, 100*perRound)
		midway <- acked
	}()
	time.Sleep(300 * time.Millisecond)
	kill()
	acked := <-midway

	addr, kill = startChild(t, mode, dir, "")
	defer kill()
	second := perRound + acked
	if _, err := produce(ctx, addr, second, second+perRound); err != nil {
		return second, fmt.Errorf("second round: %w", err)
	}
	got, err := readAll(ctx, addr)
	for i := range second + perRound {
		if i < perRound+acked || i >= second {
			if !got[fmt.Sprint(i)] {
				lost++
			}
		}
	}
	t.Logf("%s: %d acknowledged before the crash (%d of them mid-write), %d after, %d did not read back",
		mode, perRound+acked, acked, perRound, lost)
	if err == nil {
		err = committedInRange(ctx, addr)
	}
	return lost, err
}

// startChild starts the test binary as a devbroker on a free port and returns its address and a
// function that SIGKILLs it and waits for it.
func startChild(t *testing.T, mode, dir, topics string) (addr string, kill func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-port", "0", "-data-dir", dir, "-topics", topics, "-partitions", "3", "-log-level", "none")
	cmd.Env = append(os.Environ(), childEnv+"="+mode)
	cmd.Stderr = os.Stderr
	// The child dies with the test process, even one that panics before its cleanups run.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	kill = func() {
		if !killed {
			killed = true
			_ = cmd.Process.Signal(syscall.SIGKILL)
			_ = cmd.Wait()
		}
	}
	t.Cleanup(kill)
	lines := bufio.NewScanner(out)
	if !lines.Scan() {
		kill()
		t.Fatal("the child broker printed nothing")
	}
	fields := strings.Fields(lines.Text()) // devbroker: listening on ADDR (...
	if len(fields) < 4 || fields[1] != "listening" {
		kill()
		t.Fatalf("first line %q, want the listening line", lines.Text())
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	return fields[3], kill
}

// produce writes messages from..to-1 to crashTopic one acknowledged batch of ten at a time, spread
// over the partitions, and returns how many were acknowledged before the first error.
func produce(ctx context.Context, addr string, from, to int) (acked int, err error) {
	w := &kafka.Writer{
		Addr: kafka.TCP(addr), Topic: crashTopic, Balancer: &kafka.RoundRobin{},
		RequiredAcks: kafka.RequireAll, AllowAutoTopicCreation: true, BatchSize: 10,
		BatchTimeout: time.Millisecond, MaxAttempts: 20, WriteBackoffMax: 200 * time.Millisecond,
	}
	defer w.Close()
	for lo := from; lo < to; lo += 10 {
		var msgs []kafka.Message
		for i := lo; i < min(lo+10, to); i++ {
			msgs = append(msgs, kafka.Message{Value: []byte(fmt.Sprint(i))})
		}
		if err := w.WriteMessages(ctx, msgs...); err != nil {
			return acked, err
		}
		acked += len(msgs)
	}
	return acked, nil
}

const crashGroup = "crash-test"

// commitAll reads the first round as a group member and commits every message it got.
func commitAll(ctx context.Context, addr string) error {
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers: []string{addr}, Topic: crashTopic, GroupID: crashGroup,
		StartOffset: kafka.FirstOffset, MaxWait: 100 * time.Millisecond,
		HeartbeatInterval: 200 * time.Millisecond, SessionTimeout: 6 * time.Second,
	})
	defer r.Close()
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	for n := 0; ; n++ {
		m, err := r.FetchMessage(rctx)
		if err != nil {
			if n == 0 {
				return err
			}
			return nil // read what the group was given in 3 s
		}
		if err := r.CommitMessages(ctx, m); err != nil {
			return err
		}
	}
}

// readAll reads each partition of crashTopic from its first offset to its last and returns the
// values it read. kafka-go panics on some garbled batches (bytes.Buffer.Grow: negative count in
// readMessageV1): that is returned as an error too.
func readAll(ctx context.Context, addr string) (got map[string]bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("kafka-go panicked reading the log: %v", r)
		}
	}()
	return readPartitions(ctx, addr)
}

func readPartitions(ctx context.Context, addr string) (map[string]bool, error) {
	got := map[string]bool{}
	conn, err := kafka.DialContext(ctx, "tcp", addr)
	if err != nil {
		return got, err
	}
	parts, err := conn.ReadPartitions(crashTopic)
	conn.Close()
	if err != nil {
		return got, err
	}
	for _, p := range parts {
		pc, err := kafka.DialLeader(ctx, "tcp", addr, crashTopic, p.ID)
		if err != nil {
			return got, err
		}
		first, last, err := pc.ReadOffsets()
		if err != nil {
			pc.Close()
			return got, err
		}
		if _, err := pc.Seek(first, kafka.SeekAbsolute); err != nil {
			pc.Close()
			return got, err
		}
		_ = pc.SetReadDeadline(time.Now().Add(10 * time.Second))
		for off := first; off < last; off++ {
			m, err := pc.ReadMessage(1 << 20)
			if err != nil {
				pc.Close()
				return got, fmt.Errorf("partition %d offset %d of [%d, %d): %w", p.ID, off, first, last, err)
			}
			got[string(m.Value)] = true
		}
		pc.Close()
	}
	return got, nil
}

// committedInRange checks that every offset the group committed lies inside its partition's log.
func committedInRange(ctx context.Context, addr string) error {
	client := &kafka.Client{Addr: kafka.TCP(addr), Timeout: 10 * time.Second}
	res, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: crashGroup, Topics: map[string][]int{crashTopic: {0, 1, 2}}})
	if err != nil {
		return err
	}
	if res.Error != nil {
		return res.Error
	}
	for _, p := range res.Topics[crashTopic] {
		if p.Error != nil {
			return p.Error
		}
		conn, err := kafka.DialLeader(ctx, "tcp", addr, crashTopic, p.Partition)
		if err != nil {
			return err
		}
		_, last, err := conn.ReadOffsets()
		conn.Close()
		if err != nil {
			return err
		}
		if p.CommittedOffset > last {
			return fmt.Errorf("partition %d: committed offset %d past the log's end %d: %w",
				p.Partition, p.CommittedOffset, last, errors.New("offset out of range"))
		}
	}
	return nil
}
