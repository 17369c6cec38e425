package app

import (
	"testing"
	"time"
)

// TestMemcachedTTL: the memcached strategy's item, in whole seconds, outlives the lease by at
// least the second memcached's clock may take off it.
func TestMemcachedTTL(t *testing.T) {
	for ttl, want := range map[time.Duration]time.Duration{
		3 * time.Second:         4 * time.Second,
		3500 * time.Millisecond: 5 * time.Second,
		time.Millisecond:        2 * time.Second,
		5 * time.Second:         6 * time.Second,
	} {
		if got := memcachedTTL(ttl); got != want {
			t.Errorf("memcachedTTL(%s) = %s, want %s", ttl, got, want)
		}
	}
}
