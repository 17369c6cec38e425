package itest

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// ZKTick is the tickTime of a ZKEnsemble: short, so that a follower notices a dead leader and an
// election ends in about a second. The servers clamp session timeouts to [2, 20] ticks unless told
// otherwise; the ensemble allows sessions of up to ZKMaxSessionTimeout instead, so that a client
// gets the session timeout it asks for.
const (
	ZKTick              = 250 * time.Millisecond
	ZKMaxSessionTimeout = 30 * time.Second
)

// javaLib is where Debian's zookeeper package puts its jars.
const javaLib = "/usr/share/java"

// Ensemble is a ZooKeeper ensemble of a test's own: three QuorumPeerMain JVMs on 127.0.0.1, each
// with its client, quorum and election ports and a data directory (myid, snapshots, logs) that
// survives a Kill and Start.
type Ensemble struct {
	tb      testing.TB
	servers []*Server
	data    []string // each server's data directory
}

// ZKEnsemble starts a three-server ensemble and waits until it has elected a leader and every
// server serves clients. It fails the test, naming the fix, if ZooKeeper's jars are missing.
// A JVM costs a second or two of CPU to start: share one ensemble among the tests of a package
// that do not break it.
func ZKEnsemble(tb testing.TB) *Ensemble {
	tb.Helper()
	Integration(tb)
	start := time.Now()
	cp, err := zookeeperClasspath()
	if err != nil {
		tb.Fatalf("%v (%s: scripts/services.sh installs the zookeeper package)", err, hint)
	}
	const n = 3
	type ports struct{ client, quorum, election int }
	ps := make([]ports, n)
	for i := range ps {
		ps[i] = ports{FreePort(tb), FreePort(tb), FreePort(tb)}
	}
	var peers strings.Builder
	for i, p := range ps {
		fmt.Fprintf(&peers, "server.%d=127.0.0.1:%d:%d\n", i+1, p.quorum, p.election)
	}
	e := &Ensemble{tb: tb}
	for i, p := range ps {
		dir := tb.TempDir()
		data := filepath.Join(dir, "data")
		if err := os.MkdirAll(data, 0o755); err != nil {
			tb.Fatal(err)
		}
		writeConf(tb, data, "myid", strconv.Itoa(i+1)+"\n")
		e.data = append(e.data, data)
		cfg := writeConf(tb, dir, "zoo.cfg", fmt.Sprintf(`tickTime=%d
initLimit=20
syncLimit=10
maxSessionTimeout=%d
dataDir=%s
clientPort=%d
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=srvr,ruok,stat,mntr
%s`, ZKTick.Milliseconds(), ZKMaxSessionTimeout.Milliseconds(), data, p.client, peers.String()))
		log4j := writeConf(tb, dir, "log4j.properties", `log4j.rootLogger=WARN, CONSOLE
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} %-5p [%t:%C{1}@%L] - %m%n
`)
		port := strconv.Itoa(p.client)
		e.servers = append(e.servers, startServer(tb, "zookeeper "+strconv.Itoa(i+1), port,
			"java", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData",
			"-Dlog4j.configuration=file:"+log4j, "-cp", cp,
			"org.apache.zookeeper.server.quorum.QuorumPeerMain", cfg))
	}
	e.WaitQuorum()
	tb.Logf("zookeeper ensemble of %d up in %s: %v", n, time.Since(start).Round(time.Millisecond), e.Servers())
	return e
}

// zookeeperClasspath is the server jar plus slf4j's log4j binding and log4j 1.2, as Debian names
// them (scripts/services.sh's zookeeper_classpath).
func zookeeperClasspath() (string, error) {
	var cp []string
	for _, name := range []string{"zookeeper", "slf4j-log4j12", "log4j-1.2"} {
		found := ""
		if _, err := os.Stat(filepath.Join(javaLib, name+".jar")); err == nil {
			found = filepath.Join(javaLib, name+".jar")
		} else if m, _ := filepath.Glob(filepath.Join(javaLib, name+"-[0-9]*.jar")); len(m) > 0 {
			found = m[0]
		}
		if found == "" {
			return "", fmt.Errorf("zookeeper: no %s jar in %s (is the zookeeper package installed?)", name, javaLib)
		}
		cp = append(cp, found)
	}
	return strings.Join(cp, ":"), nil
}

// Wipe gives the ensemble new, empty data, as a rebuilt cluster or lost disks would: it
// SIGKILLs every server, deletes everything in their data directories but myid (snapshots,
// transaction logs, epochs), starts them again on the same ports and waits for the quorum.
// Clients on the server list reconnect to data that knows neither their sessions nor any node,
// and whose zxids count from the start again.
func (e *Ensemble) Wipe() {
	e.tb.Helper()
	for _, s := range e.servers {
		s.Kill()
	}
	for _, dir := range e.data {
		entries, err := os.ReadDir(dir)
		if err != nil {
			e.tb.Fatal(err)
		}
		for _, en := range entries {
			if en.Name() == "myid" {
				continue
			}
			if err := os.RemoveAll(filepath.Join(dir, en.Name())); err != nil {
				e.tb.Fatal(err)
			}
		}
	}
	for _, s := range e.servers {
		s.Start()
	}
	e.WaitQuorum()
}

// Servers returns the client addresses of the ensemble, for a ZooKeeper client's server list.
func (e *Ensemble) Servers() []string {
	addrs := make([]string, len(e.servers))
	for i, s := range e.servers {
		addrs[i] = s.Addr()
	}
	return addrs
}

// Nodes returns the server processes.
func (e *Ensemble) Nodes() []*Server { return e.servers }

// Mode is the Mode: line of the server's srvr answer (leader, follower, standalone), or "" if it
// does not serve clients now (looking for a leader, not running).
func (e *Ensemble) Mode(s *Server) string {
	out, err := FourLetter(s.Addr(), "srvr")
	if err != nil {
		return ""
	}
	for line := range strings.Lines(out) {
		if m, ok := strings.CutPrefix(line, "Mode: "); ok {
			return strings.TrimSpace(m)
		}
	}
	return ""
}

// Leader returns the server that is leader now, or nil if none is.
func (e *Ensemble) Leader() *Server {
	for _, s := range e.servers {
		if s.Running() && e.Mode(s) == "leader" {
			return s
		}
	}
	return nil
}

// WaitQuorum waits until every running server serves clients, one of them as the leader.
func (e *Ensemble) WaitQuorum() {
	e.tb.Helper()
	Eventually(e.tb, 60*time.Second, func() (bool, string) {
		leaders := 0
		for _, s := range e.servers {
			if !s.Running() {
				continue
			}
			switch m := e.Mode(s); m {
			case "leader":
				leaders++
			case "follower":
			default:
				return false, fmt.Sprintf("%s: mode %q\n%s", s.Addr(), m, lastLines(s.Logs(), 10))
			}
		}
		return leaders == 1, fmt.Sprintf("%d leaders", leaders)
	})
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// FourLetter sends a ZooKeeper four-letter command (srvr, ruok, mntr…) to addr and returns the
// answer.
func FourLetter(addr, cmd string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(c, cmd); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	return string(b), err
}
