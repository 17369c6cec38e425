package redislock

import "time"

// StallRenewal makes l's renewal send nothing from now on, as if its process were paused: the
// key expires unless something else touches it, and Lost closes when the lease runs out.
func StallRenewal(l *Lease) { l.dog.Stall() }

// Keys returns the lock key, fence counter key and release channel of name.
func Keys(c *Client, name string) (key, fence, channel string) {
	k, err := c.keysOf(name)
	if err != nil {
		panic(err)
	}
	return k.key, k.fence, k.channel
}

// Settings returns the lease and re-check interval New chose.
func Settings(c *Client) (ttl, recheck time.Duration) { return c.ttl, c.recheck }

// AcquireScriptHash is the SHA-1 the acquire script runs under (EVALSHA).
var AcquireScriptHash = acquireScript.Hash()

// LeaseKey returns the Redis key of l's lock.
func LeaseKey(l *Lease) string { return l.k.key }

// RenewScriptHash is the SHA-1 the renewal script runs under (EVALSHA).
var RenewScriptHash = renewScript.Hash()
