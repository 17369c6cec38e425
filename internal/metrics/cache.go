package metrics

import (
	"maps"
	"sync"
	"sync/atomic"
)

// maxCachedSeries bounds a seriesCache. The label sets of the hot paths are few (routes ×
// methods × codes, strategies × outcomes); a client that invents methods gets its series made
// the slow way once the cache is full, rather than growing the cache.
const maxCachedSeries = 512

// seriesCache remembers the series (children of a metric vector) made for each label set, so
// that a hot path finds them with one map read instead of hashing its labels into each vector
// (and formatting numbers as label strings) on every call. Reads take no lock: the map is
// replaced, never modified, under mu.
type seriesCache[K comparable, V any] struct {
	m  atomic.Pointer[map[K]V]
	mu sync.Mutex
}

// get returns the series of k, made by newSeries when k is new.
func (c *seriesCache[K, V]) get(k K, newSeries func() V) V {
	if m := c.m.Load(); m != nil {
		if v, ok := (*m)[k]; ok {
			return v
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var old map[K]V
	if m := c.m.Load(); m != nil {
		old = *m
	}
	if v, ok := old[k]; ok {
		return v
	}
	v := newSeries()
	if len(old) >= maxCachedSeries {
		return v
	}
	next := make(map[K]V, len(old)+1)
	maps.Copy(next, old)
	next[k] = v
	c.m.Store(&next)
	return v
}
