// Command devbroker is a development-only, Kafka-wire-compatible broker for
// running seckill-go on a machine without Docker or a JVM Kafka install.
//
// It wraps franz-go's kfake: one in-process broker on 127.0.0.1 that speaks
// the Kafka protocol (including the old consumer-group API versions that
// kafka-go still uses), persists its log and committed offsets to -data-dir,
// and by default fsyncs every produce so an acknowledged message survives a
// SIGKILL. scripts/services.sh builds and starts it.
//
// It also reaps consumer-group members that kfake would keep forever after
// their process died in the middle of joining (see reaper.go); real Kafka's
// session timeout evicts those by itself.
//
// A topic a client's metadata request auto-creates is created through
// kfake's CreateTopic first, which writes it to disk at once (kfake's own
// auto-creation writes it only on a clean shutdown; see persistAutoCreated).
//
// It is not a Kafka: no replication, no tuning, no security, and it must
// never be used outside local development and CI. docker-compose runs a real
// Apache Kafka 3.9 (KRaft) broker instead; only the compose smoke run
// (scripts/compose-smoke.sh) puts this broker in a container in Kafka's place,
// with -host 0.0.0.0 -advertise kafka so that the other containers reach it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// After the first signal, restore the default handlers so that a second
	// Ctrl-C kills a shutdown that hangs while flushing the data dir.
	context.AfterFunc(ctx, stop)

	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "devbroker:", err)
		os.Exit(1)
	}
}

// config is the broker's whole configuration, read once from flags.
type config struct {
	host       string // address to bind
	advertise  string // host name clients are told to connect to ("": the bound address)
	port       int
	dataDir    string
	partitions int
	topics     []string
	autoCreate bool
	sync       bool
	logLevel   slog.Level
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil // -h printed the usage
	}
	if err != nil {
		return err
	}

	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.logLevel}))

	opts := []kfake.Opt{
		kfake.Ports(cfg.port), // one broker
		kfake.ListenFn(listenFn(cfg.host, cfg.advertise)),
		kfake.DefaultNumPartitions(cfg.partitions),
		kfake.SeedTopics(int32(cfg.partitions), cfg.topics...),
		kfake.WithLogger(kfakeLogger{log}),
	}
	if cfg.autoCreate {
		opts = append(opts, kfake.AllowAutoTopicCreation())
	}
	if cfg.dataDir != "" {
		opts = append(opts, kfake.DataDir(cfg.dataDir))
	}
	if cfg.sync {
		opts = append(opts, kfake.SyncWrites())
	}

	cluster, err := kfake.NewCluster(opts...)
	if err != nil {
		return fmt.Errorf("start cluster: %w", err)
	}
	if cfg.autoCreate && persistAutoCreatedTopics {
		persistAutoCreated(cluster)
	}
	reaper, err := newReaper(log, cluster, reapInterval)
	if err != nil {
		cluster.Close()
		return err
	}
	var wg sync.WaitGroup
	wg.Go(func() { reaper.run(ctx) })

	// Seed topics apply only to a fresh data dir: a reloaded one keeps the
	// topics and partition counts it was created with.
	fmt.Fprintf(stdout, "devbroker: listening on %s (topics=%s partitions=%d data-dir=%q sync=%t)\n",
		strings.Join(cluster.ListenAddrs(), ","), strings.Join(cfg.topics, ","), cfg.partitions, cfg.dataDir, cfg.sync)

	<-ctx.Done()
	fmt.Fprintln(stdout, "devbroker: shutting down")
	wg.Wait() // the reaper stops with ctx
	reaper.close()
	cluster.Close() // flushes and closes the data dir
	return nil
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("devbroker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfg      config
		topics   string
		logLevel string
	)
	fs.StringVar(&cfg.host, "host", "127.0.0.1", "address to listen on")
	fs.StringVar(&cfg.advertise, "advertise", "", "host name the broker gives clients in metadata and coordinator answers (empty: the -host address)")
	fs.IntVar(&cfg.port, "port", 9092, "TCP port to listen on")
	fs.StringVar(&cfg.dataDir, "data-dir", "", "directory that keeps the log and committed offsets across restarts (empty: in memory)")
	fs.IntVar(&cfg.partitions, "partitions", 6, "partitions of seeded and auto-created topics")
	fs.StringVar(&topics, "topics", "seckill.orders", "comma-separated topics to create at first start (empty: none, clients create them with CreateTopics)")
	fs.BoolVar(&cfg.autoCreate, "auto-create-topics", true, "create a topic a client asks for that does not exist (Kafka's auto.create.topics.enable)")
	fs.BoolVar(&cfg.sync, "sync", true, "fsync every produce so an acked message survives a crash")
	fs.StringVar(&logLevel, "log-level", "warn", "none, error, warn, info or debug")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}

	if cfg.host == "" {
		return config{}, errors.New("-host: an address is required (0.0.0.0 for every interface)")
	}
	if cfg.port < 0 || cfg.port > 65535 {
		return config{}, fmt.Errorf("-port %d: out of range", cfg.port)
	}
	if cfg.partitions < 1 {
		return config{}, fmt.Errorf("-partitions %d: must be at least 1", cfg.partitions)
	}
	for t := range strings.SplitSeq(topics, ",") {
		if t = strings.TrimSpace(t); t != "" {
			cfg.topics = append(cfg.topics, t)
		}
	}
	lvl, err := parseLogLevel(logLevel)
	if err != nil {
		return config{}, err
	}
	cfg.logLevel = lvl
	return cfg, nil
}

// listenFn returns kfake's listener function. kfake asks for 127.0.0.1:PORT and tells clients the
// listener's address as the broker's; this binds host:PORT instead and, with advertise set,
// reports advertise:PORT as that address, so that clients elsewhere (other containers) are sent
// to a name they can reach rather than to 0.0.0.0.
func listenFn(host, advertise string) func(network, address string) (net.Listener, error) {
	return func(network, address string) (net.Listener, error) {
		_, port, err := net.SplitHostPort(address)
		if err != nil {
			return nil, err
		}
		ln, err := net.Listen(network, net.JoinHostPort(host, port))
		if err != nil || advertise == "" {
			return ln, err
		}
		_, port, _ = net.SplitHostPort(ln.Addr().String()) // port 0 became a real one
		return advertisedListener{Listener: ln, addr: advertisedAddr(net.JoinHostPort(advertise, port))}, nil
	}
}

// advertisedListener is a listener that reports another address as its own.
type advertisedListener struct {
	net.Listener
	addr net.Addr
}

func (l advertisedListener) Addr() net.Addr { return l.addr }

// advertisedAddr is a HOST:PORT address whose host may be a name.
type advertisedAddr string

func (a advertisedAddr) Network() string { return "tcp" }
func (a advertisedAddr) String() string  { return string(a) }

// levelNone is above every level anything logs at.
const levelNone = slog.LevelError + 1

func parseLogLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "none":
		return levelNone, nil
	case "error":
		return slog.LevelError, nil
	case "warn":
		return slog.LevelWarn, nil
	case "info":
		return slog.LevelInfo, nil
	case "debug":
		return slog.LevelDebug, nil
	default:
		return 0, fmt.Errorf("-log-level %q: want none, error, warn, info or debug", s)
	}
}

// kfakeLogger adapts kfake's printf-style logger to slog, so the broker and the reaper write one
// format under one level.
type kfakeLogger struct{ log *slog.Logger }

// Logf logs one kfake message at the matching slog level.
func (l kfakeLogger) Logf(level kfake.LogLevel, format string, args ...any) {
	var lvl slog.Level
	switch level {
	case kfake.LogLevelError:
		lvl = slog.LevelError
	case kfake.LogLevelWarn:
		lvl = slog.LevelWarn
	case kfake.LogLevelInfo:
		lvl = slog.LevelInfo
	case kfake.LogLevelDebug:
		lvl = slog.LevelDebug
	default:
		return
	}
	ctx := context.Background()
	if l.log.Enabled(ctx, lvl) {
		l.log.Log(ctx, lvl, "kfake: "+fmt.Sprintf(format, args...))
	}
}

// persistAutoCreatedTopics is false only in the tests' negative control.
var persistAutoCreatedTopics = true

// persistAutoCreated creates, through kfake's CreateTopic, every topic a metadata request names
// and may auto-create, before kfake answers the request. kfake's own auto-creation (in its
// metadata handler) writes the topic's name to the data dir only at a clean shutdown: after a
// SIGKILL the topic came back empty, its old segment files still on disk, and the next batches
// were appended to them at positions kfake did not know — readers got "unsupported magic byte",
// groups' committed offsets lay past the log's end. CreateTopic writes topics.json at once.
// A topic that exists answers TopicAlreadyExists, which is ignored; the cost is one pass through
// the cluster's loop per metadata request naming topics (a client sends a few a minute).
func persistAutoCreated(cluster *kfake.Cluster) {
	cluster.ControlKey(int16(kmsg.Metadata), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		mr, ok := req.(*kmsg.MetadataRequest)
		if !ok || !mr.AllowAutoTopicCreation {
			return nil, nil, false
		}
		var names []string
		for _, t := range mr.Topics {
			if t.Topic != nil && t.TopicID == [16]byte{} {
				names = append(names, *t.Topic)
			}
		}
		if len(names) > 0 {
			// CreateTopic runs on the cluster's loop, which this control function holds: sleep
			// it, so that the loop is free while the topics are created.
			cluster.SleepControl(func() {
				for _, name := range names {
					_ = cluster.CreateTopic(name, -1, nil) // -1: the default partitions
				}
			})
		}
		return nil, nil, false // kfake answers the request, the topics now on disk
	})
}
