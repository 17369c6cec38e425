package main

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// TestKafkaTopics runs the two scripts as docker-compose.yml does, against an in-process kfake
// broker that, like the compose broker, creates no topic by itself.
func TestKafkaTopics(t *testing.T) {
	t.Parallel()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	addr := cluster.ListenAddrs()[0]

	call := func(name string, args ...string) (string, error) {
		t.Helper()
		var out bytes.Buffer
		err := run(t.Context(), name, append([]string{"--bootstrap-server", addr}, args...), &out, io.Discard)
		return out.String(), err
	}
	create := []string{"--create", "--if-not-exists", "--topic", "orders", "--partitions", "6", "--replication-factor", "1"}

	if _, err := call("kafka-topics.sh", "--describe", "--topic", "orders"); err == nil {
		t.Error("--describe of a topic that does not exist succeeded")
	}
	out, err := call("kafka-topics.sh", create...)
	if err != nil || !strings.Contains(out, "Created topic orders.") {
		t.Fatalf("--create: %q, %v", out, err)
	}
	if out, err := call("kafka-topics.sh", create...); err != nil || out != "" {
		t.Errorf("--create --if-not-exists of an existing topic: %q, %v; want silence and success", out, err)
	}
	if _, err := call("kafka-topics.sh", "--create", "--topic", "orders", "--partitions", "6"); err == nil {
		t.Error("--create without --if-not-exists of an existing topic succeeded")
	}
	out, err = call("kafka-topics.sh", "--describe", "--topic", "orders")
	if err != nil || !strings.Contains(out, "PartitionCount: 6\t") || strings.Count(out, "Partition: ") != 6 {
		t.Errorf("--describe: %q, %v; want 6 partitions", out, err)
	}
	out, err = call("kafka-broker-api-versions.sh")
	if err != nil || !strings.HasPrefix(out, addr+" -> (") || !strings.Contains(out, "(11): ") {
		t.Errorf("api versions: %q, %v; want the broker's APIs, JoinGroup (11) among them", out, err)
	}
}

func TestKafkaToolsRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"kafkatools", []string{"--bootstrap-server", "x:9092"}},
		{"kafka-topics.sh", []string{"--describe", "--topic", "t"}},
		{"kafka-topics.sh", []string{"--bootstrap-server", "x:9092", "--topic", "t"}},
		{"kafka-topics.sh", []string{"--bootstrap-server", "x:9092", "--create", "--describe", "--topic", "t"}},
		{"kafka-topics.sh", []string{"--bootstrap-server", "x:9092", "--create"}},
		{"kafka-broker-api-versions.sh", []string{"--bootstrap-server", "x:9092", "extra"}},
		{"kafka-broker-api-versions.sh", []string{"--bootstrap-server", "x:9092", "--topic", "t"}},
	} {
		if err := run(t.Context(), tc.name, tc.args, io.Discard, io.Discard); err == nil {
			t.Errorf("%s %q: no error", tc.name, tc.args)
		}
	}
}
