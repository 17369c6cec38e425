package redlock

import "time"

// LeaseKey returns the Redis key of l's lock.
func LeaseKey(l *Lease) string { return l.key }

// Drift returns the drift allowance New chose.
func Drift(c *Client) time.Duration { return c.drift }
