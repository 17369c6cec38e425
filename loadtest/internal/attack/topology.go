package attack

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"
)

// TopologyOf asks the app where its dependencies are (the "topology" of its /readyz: Redis
// single, cluster or sentinel, and the ZooKeeper servers), for the report to say what the run
// ran on. A replica that does not say (an older build, not ready) gives nil, and the report says
// "unknown": the run itself does not depend on it.
func TopologyOf(ctx context.Context, admin *AdminClient) map[string]string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rsp, err := admin.API().ReadyzWithResponse(ctx)
	if err != nil || rsp.JSON200 == nil || rsp.JSON200.Topology == nil {
		return nil
	}
	return *rsp.JSON200.Topology
}

// TopologyLine is a report's line about the topology, e.g. "Redis cluster (seeds …) ·
// ZooKeeper 127.0.0.1:2191,…".
func TopologyLine(t map[string]string) string {
	if len(t) == 0 {
		return "topology: unknown"
	}
	names := map[string]string{"redis": "Redis", "zookeeper": "ZooKeeper"}
	keys := make([]string, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		name := names[k]
		if name == "" {
			name = k
		}
		parts = append(parts, fmt.Sprintf("%s %s", name, t[k]))
	}
	return strings.Join(parts, " · ")
}
