// Command kafkatools stands in for the two Apache Kafka scripts docker-compose.yml runs, inside
// the Kafka stand-in image of the compose smoke run (deploy/standin/Dockerfile, target kafka),
// where no Apache Kafka exists: it is installed as /opt/kafka/bin/kafka-topics.sh and
// /opt/kafka/bin/kafka-broker-api-versions.sh and picks its part by the name it is called by.
//
//	kafka-topics.sh --bootstrap-server HOST:PORT --create [--if-not-exists] --topic T --partitions N --replication-factor R
//	kafka-topics.sh --bootstrap-server HOST:PORT --describe --topic T
//	kafka-broker-api-versions.sh --bootstrap-server HOST:PORT
//
// Only these flags, the ones the compose file uses, are understood, so that the kafka-init
// command and the kafka healthcheck of the shipped file run unchanged against the dev broker.
// It speaks the Kafka protocol through kafka-go (CreateTopics, Metadata, ApiVersions) and exits
// non-zero when the broker does not answer or refuses. It is a test double of two scripts for
// the smoke run, never an admin tool: it must not grow into one.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
)

func main() {
	if err := run(context.Background(), filepath.Base(os.Args[0]), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(os.Stderr, "%s: %v\n", filepath.Base(os.Args[0]), err)
		}
		os.Exit(1)
	}
}

// run does what the script named name would do with args.
func run(ctx context.Context, name string, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	bootstrap := fs.String("bootstrap-server", "", "HOST:PORT of a broker (required)")
	timeout := fs.Duration("timeout", 10*time.Second, "longest wait for the broker's answers")
	var topics topicsArgs
	if name == "kafka-topics.sh" {
		fs.BoolVar(&topics.create, "create", false, "create --topic")
		fs.BoolVar(&topics.describe, "describe", false, "describe --topic")
		fs.BoolVar(&topics.ifNotExists, "if-not-exists", false, "with --create: a topic that exists is no error")
		fs.StringVar(&topics.topic, "topic", "", "the topic")
		fs.IntVar(&topics.partitions, "partitions", 1, "with --create: partitions of the topic")
		fs.IntVar(&topics.replication, "replication-factor", 1, "with --create: replicas of each partition")
	} else if name != "kafka-broker-api-versions.sh" {
		return fmt.Errorf("called as %q: link it as kafka-topics.sh or kafka-broker-api-versions.sh", name)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *bootstrap == "" {
		return errors.New("--bootstrap-server is required")
	}
	// Like Kafka's tools, take the first of a comma-separated list.
	addr, _, _ := strings.Cut(*bootstrap, ",")
	client := &kafka.Client{Addr: kafka.TCP(addr), Timeout: *timeout}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	if name == "kafka-broker-api-versions.sh" {
		return apiVersions(ctx, client, addr, stdout)
	}
	return topics.run(ctx, client, stdout)
}

// apiVersions prints the API versions the broker supports, as kafka-broker-api-versions.sh does
// (without the "usable" column, which depends on Kafka's own client).
func apiVersions(ctx context.Context, client *kafka.Client, addr string, stdout io.Writer) error {
	resp, err := client.ApiVersions(ctx, &kafka.ApiVersionsRequest{})
	if err != nil {
		return fmt.Errorf("ApiVersions to %s: %w", addr, err)
	}
	if resp.Error != nil {
		return fmt.Errorf("ApiVersions to %s: %w", addr, resp.Error)
	}
	fmt.Fprintf(stdout, "%s -> (\n", addr)
	for _, k := range resp.ApiKeys {
		fmt.Fprintf(stdout, "\t%s(%d): %d to %d,\n", k.ApiName, k.ApiKey, k.MinVersion, k.MaxVersion)
	}
	fmt.Fprintln(stdout, ")")
	return nil
}

// topicsArgs is what kafka-topics.sh was asked.
type topicsArgs struct {
	create, describe, ifNotExists bool
	topic                         string
	partitions, replication       int
}

func (a topicsArgs) run(ctx context.Context, client *kafka.Client, stdout io.Writer) error {
	switch {
	case a.create == a.describe:
		return errors.New("want exactly one of --create and --describe")
	case a.topic == "":
		return errors.New("--topic is required")
	case a.describe:
		return describe(ctx, client, a.topic, stdout)
	}
	resp, err := client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{
		Topic: a.topic, NumPartitions: a.partitions, ReplicationFactor: a.replication,
	}}})
	if err != nil {
		return fmt.Errorf("CreateTopics: %w", err)
	}
	switch err := resp.Errors[a.topic]; {
	case err == nil:
		fmt.Fprintf(stdout, "Created topic %s.\n", a.topic)
	case errors.Is(err, kafka.TopicAlreadyExists) && a.ifNotExists:
	default:
		return fmt.Errorf("create topic %s: %w", a.topic, err)
	}
	return nil
}

// describe prints a topic's partitions as kafka-topics.sh --describe does (without TopicId and
// Configs).
func describe(ctx context.Context, client *kafka.Client, topic string, stdout io.Writer) error {
	resp, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return fmt.Errorf("metadata of %s: %w", topic, err)
	}
	for _, t := range resp.Topics {
		if t.Name != topic {
			continue
		}
		if t.Error != nil {
			return fmt.Errorf("topic %s: %w", topic, t.Error)
		}
		replicas := 0
		if len(t.Partitions) > 0 {
			replicas = len(t.Partitions[0].Replicas)
		}
		fmt.Fprintf(stdout, "Topic: %s\tPartitionCount: %d\tReplicationFactor: %d\n", topic, len(t.Partitions), replicas)
		for _, p := range t.Partitions {
			fmt.Fprintf(stdout, "\tTopic: %s\tPartition: %d\tLeader: %d\tReplicas: %s\tIsr: %s\n",
				topic, p.ID, p.Leader.ID, brokerIDs(p.Replicas), brokerIDs(p.Isr))
		}
		return nil
	}
	return fmt.Errorf("topic %s: not in the broker's metadata", topic)
}

func brokerIDs(bs []kafka.Broker) string {
	ids := make([]string, len(bs))
	for i, b := range bs {
		ids[i] = fmt.Sprint(b.ID)
	}
	return strings.Join(ids, ",")
}
