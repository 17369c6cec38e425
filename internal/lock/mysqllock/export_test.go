package mysqllock

import "time"

// StallRenewal makes l's watchdog send nothing from now on, as if its process were paused: the
// row expires unless something else touches it, and Lost closes when the lease runs out.
func StallRenewal(l *Lease) { l.dog.Stall() }

// Settings returns the lease and back-off bounds New chose.
func Settings(c *Client) (ttl, minBackoff, maxBackoff time.Duration) {
	return c.ttl, c.backoff.Min, c.backoff.Max
}

// RetryDeadlocks is how Release runs its delete.
var RetryDeadlocks = retryDeadlocks

// ReleaseTries bounds RetryDeadlocks.
const ReleaseTries = releaseTries
