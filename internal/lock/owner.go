package lock

import "context"

// Re-entrant locks (zklock's Reentrant; the Redis one of the lock zoo) let the holder of a lock
// take it again at once instead of waiting for itself. Java's recipes (Curator's
// InterProcessMutex, Redisson's RLock) know who "the holder" is from the calling thread; Go has no
// thread identity, and a goroutine is the wrong unit anyway (one purchase may hop goroutines, two
// may share one). So the owner is explicit: the caller names it in the ctx, and every Acquire
// made with that ctx, or one derived from it, acts for that owner.

type ownerKey struct{}

// WithOwner returns a copy of ctx whose lock acquisitions act for owner: a re-entrant lock already
// held by owner is granted again at once, and must then be released once more. An empty owner
// is no owner. The owner is also what a re-entrant lock shows an operator as the holder, so make
// it say where it comes from (host, process, batch).
func WithOwner(ctx context.Context, owner string) context.Context {
	return context.WithValue(ctx, ownerKey{}, owner)
}

// OwnerFrom returns the owner that ctx acquires for, and false if it names none: each such
// acquisition is then an owner of its own, which never re-enters.
func OwnerFrom(ctx context.Context) (string, bool) {
	owner, _ := ctx.Value(ownerKey{}).(string)
	return owner, owner != ""
}
