package redisreentrant

import "time"

// StallRenewal makes the renewal of l's hold send nothing from now on, as if its process were
// paused: the hash expires unless something else touches it, and Lost closes when the TTL runs
// out.
func StallRenewal(l *Lease) { l.h.dog.Stall() }

// Keys returns the lock hash, fence counter key and release channel of name.
func Keys(c *Client, name string) (key, fence, channel string) {
	k, err := c.keysOf(name)
	if err != nil {
		panic(err)
	}
	return k.key, k.fence, k.channel
}

// OwnerField is the hash field that counts owner's holds through c.
func OwnerField(c *Client, owner string) string { return c.ownerField(owner) }

// Settings returns the TTL and the longest sleep of a waiter New chose.
func Settings(c *Client) (ttl, recheck time.Duration) { return c.ttl, c.recheck }

// AcquireScriptHash is the SHA-1 the acquire script runs under (EVALSHA).
var AcquireScriptHash = acquireScript.Hash()

// Name returns the lock name l was acquired under.
func Name(l *Lease) string { return l.k.name }
