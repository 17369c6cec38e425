package sale

import "strings"

// Strategy names how a product's stock is deducted. It is a property of the product, not of a
// request: two different locks on one product at the same time would exclude nothing.
type Strategy string

// The strategies. The first five are the project's own; the others are the lock zoo: every
// mechanism of the classic write-ups on distributed locks, each kept to show how it fails. The
// unsafe ones (Safe() == false) are served only with SECKILL_ALLOW_UNSAFE_STRATEGIES.
const (
	// StrategyMySQL deducts with one conditional UPDATE (`WHERE stock >= qty`) in the purchase
	// transaction: the database row lock is the mutual exclusion.
	StrategyMySQL Strategy = "mysql"
	// StrategyRedis serialises the read-check-write under a Redis lock with a fencing token.
	StrategyRedis Strategy = "redis"
	// StrategyZK serialises the read-check-write under a ZooKeeper lock with a fencing token.
	StrategyZK Strategy = "zk"
	// StrategyRedisLua decides each purchase with one Lua script over the sale's state in Redis
	// (stock, buyers, receipts) and appends it to a Redis Stream, from which persisters write it
	// to MySQL: no lock, no database round trip on the purchase path.
	StrategyRedisLua Strategy = "redis-lua"
	// StrategyNone runs the same read-check-write with no lock and no condition. It oversells under
	// concurrency and exists only to prove that the tests and the load test catch an oversell.
	StrategyNone Strategy = "none"

	// StrategyMySQLForUpdate is the pessimistic lock: SELECT … FOR UPDATE, check, UPDATE, commit.
	// The row lock is held across round trips, so a stalled holder blocks every buyer until
	// innodb_lock_wait_timeout.
	StrategyMySQLForUpdate Strategy = "mysql-for-update"
	// StrategyMySQLVersion is the optimistic lock: read stock and version, write only if the
	// version is unchanged, run again on conflict until the lock wait is spent (429, never a
	// false sold_out).
	StrategyMySQLVersion Strategy = "mysql-version"
	// StrategyMySQLVersionCapped gives up after a few conflicts and answers sold_out while stock
	// remains: the undersell of capped optimistic retries. Unsafe.
	StrategyMySQLVersionCapped Strategy = "mysql-version-capped"
	// StrategyMySQLLockTable is a lock row inserted under a unique index, with an owner, an
	// expiry that a reaper enforces, waiting with back-off, and its auto-increment id as the
	// fencing token.
	StrategyMySQLLockTable Strategy = "mysql-lock-table"
	// StrategyMySQLLockTableNaive is the lock table of the write-ups: no expiry, no owner, no
	// fence. A holder that dies leaves its row and the sale stalls until someone deletes it. Unsafe.
	StrategyMySQLLockTableNaive Strategy = "mysql-lock-table-naive"
	// StrategyZKHerd is the naive ZooKeeper lock: every waiter watches all the lock's children,
	// so every release wakes every waiter (the herd effect). Fenced, so safe; slow.
	StrategyZKHerd Strategy = "zk-herd"
	// StrategyZKReentrant is the zk lock with the holder's identity in its node: the same owner
	// re-enters at once (Curator's InterProcessMutex), another owner waits.
	StrategyZKReentrant Strategy = "zk-reentrant"
	// StrategyRedisSetnx is the write-ups' Redis lock: SETNX, then EXPIRE as a second command,
	// DEL to release, no fence. A holder that dies between the two commands leaves a key that
	// never expires; one paused past the TTL deletes its successor's lock and sells again. Unsafe.
	StrategyRedisSetnx Strategy = "redis-setnx"
	// StrategyRedisGetset is the timestamp lock of the seckill write-ups: a deadline by the
	// client's clock in the key, taken over with GETSET once passed, no fence. A client whose
	// clock runs ahead, or a holder paused past its deadline, makes two holders. Unsafe.
	StrategyRedisGetset Strategy = "redis-getset"
	// StrategyRedisReentrant is Redisson's RLock: a hash of owner → hold count, renewed by a
	// watchdog while the owner lives, waiters woken by a message on release; the same owner
	// re-enters at once. Fenced by a token the acquire script counts, so safe.
	StrategyRedisReentrant Strategy = "redis-reentrant"
	// StrategyRedlock is the Redlock algorithm over five independent Redis servers: the lock is
	// held on a majority, within its validity time. Unfenced, as Redlock is: servers that restart
	// without persistence forget the lock and a second client wins a majority; a holder paused
	// past the validity writes after the next one. Unsafe.
	StrategyRedlock Strategy = "redlock"
	// StrategyMemcached is Memcached's add with an expiry as the lock, delete to release, no
	// fence. A restart (or an eviction) forgets the lock while its holder still works. Unsafe.
	StrategyMemcached Strategy = "memcached"
)

// Lock says what a strategy holds while it reads, checks and writes a product's stock.
type Lock int

const (
	// LockNone: no lock is held across round trips (a conditional UPDATE, a Lua script, versioned
	// writes, or nothing at all).
	LockNone Lock = iota
	// LockRow: a database row lock held across round trips (SELECT … FOR UPDATE). Its holder
	// waits for it, but it has no lease that could be lost while held.
	LockRow
	// LockLease: a lock of its own with a lease (a lock row, a Redis key, a ZooKeeper node, a
	// Memcached item). Its holder waits for it and reports it lost when the lease can no longer
	// be trusted.
	LockLease
)

// Fault is a fault the lock zoo plays inside a strategy's critical section.
type Fault string

// The faults, in the order the zoo's matrix shows them.
const (
	// FaultPause stops the lock's holder for longer than its lease (the fencing argument's
	// stop-the-world pause).
	FaultPause Fault = "pause"
	// FaultKill kills the lock's holder while it holds the lock.
	FaultKill Fault = "kill"
	// FaultRestart restarts the lock's servers empty while a holder holds the lock.
	FaultRestart Fault = "restart"
)

// Faults lists the faults in matrix order.
var Faults = []Fault{FaultPause, FaultKill, FaultRestart}

// Outcome is what a load or a fault does to a sale, as the write-ups tell it.
type Outcome string

// The outcomes a strategy can be expected to show.
const (
	// OutcomePass: no unit oversold or left unsold, the sale went on.
	OutcomePass Outcome = "PASS"
	// OutcomeOversold: more units sold than the sale had.
	OutcomeOversold Outcome = "OVERSOLD"
	// OutcomeUndersold: buyers refused (sold_out) while units remained.
	OutcomeUndersold Outcome = "UNDERSOLD"
	// OutcomeStall: the sale stopped and did not go on by itself.
	OutcomeStall Outcome = "STALL"
)

// StrategyInfo is one strategy's entry in the registry: what it is (for people: the storefront's
// drawer, the load-test report, the zoo matrix) and what the rest of the program and its harness
// derive from it (the metrics' label sets, the zoo's expectations).
type StrategyInfo struct {
	Strategy Strategy
	// Family is what guards the stock: "mysql", "redis", "zookeeper", "memcached" or "control".
	Family string
	// Safe is false for the strategies kept to show a failure (see Strategy.Safe).
	Safe bool
	// Own is true for the project's own strategies, false for the lock zoo's.
	Own bool
	// Lock is what the strategy holds across its read-check-write.
	Lock Lock
	// Summary says in one line how it works and, for the zoo's, what breaks it.
	Summary string
	// Load is the outcome the write-ups expect of the strategy under a plain stampede.
	Load Outcome
	// Faults are the outcomes expected of the faults played inside its critical section; a fault
	// with no entry does not apply (there is no lock to hold, or no server to restart).
	Faults map[Fault]Outcome
}

// leaseEnds are the expectations of a lock whose lease ends by itself and whose writes are
// fenced (or which the database holds): a paused holder and a dead one both leave the sale whole.
var leaseEnds = map[Fault]Outcome{FaultPause: OutcomePass, FaultKill: OutcomePass}

// Catalog is the strategy registry: every strategy the code knows, in the order they are shown
// (the project's own first, then the zoo by family, the unsafe ones after the safe ones of their
// family). Every list of strategies in the program is derived from it.
var Catalog = []StrategyInfo{
	{Strategy: StrategyMySQL, Family: "mysql", Safe: true, Own: true, Lock: LockNone, Load: OutcomePass,
		Summary: "One conditional UPDATE on the product’s MySQL row: the row lock is the mutual exclusion."},
	{Strategy: StrategyRedis, Family: "redis", Safe: true, Own: true, Lock: LockLease, Load: OutcomePass, Faults: leaseEnds,
		Summary: "Read-check-write under a Redis lock, fenced by a token."},
	{Strategy: StrategyZK, Family: "zookeeper", Safe: true, Own: true, Lock: LockLease, Load: OutcomePass, Faults: leaseEnds,
		Summary: "Read-check-write under a ZooKeeper lock (predecessor watch), fenced by a token."},
	{Strategy: StrategyRedisLua, Family: "redis", Safe: true, Own: true, Lock: LockNone, Load: OutcomePass,
		Summary: "Stock pre-deducted in Redis by one Lua script; written to MySQL right after."},
	// The row lock ends with the holder's transaction: a paused holder makes everyone wait, a
	// dead one's connection closes and rolls back.
	{Strategy: StrategyMySQLForUpdate, Family: "mysql", Safe: true, Lock: LockRow, Load: OutcomePass, Faults: leaseEnds,
		Summary: "SELECT … FOR UPDATE, check, UPDATE: a stalled holder blocks every buyer until the lock wait times out."},
	{Strategy: StrategyMySQLVersion, Family: "mysql", Safe: true, Lock: LockNone, Load: OutcomePass,
		Summary: "Optimistic: write only if the version is unchanged, try again on conflict; most attempts lose under contention."},
	{Strategy: StrategyMySQLLockTable, Family: "mysql", Safe: true, Lock: LockLease, Load: OutcomePass, Faults: leaseEnds,
		Summary: "A lock row under a unique index, with owner, expiry, reaper and its id as fencing token."},
	{Strategy: StrategyZKHerd, Family: "zookeeper", Safe: true, Lock: LockLease, Load: OutcomePass, Faults: leaseEnds,
		Summary: "Every waiter watches every lock node: each release wakes them all (the herd effect)."},
	{Strategy: StrategyZKReentrant, Family: "zookeeper", Safe: true, Lock: LockLease, Load: OutcomePass, Faults: leaseEnds,
		Summary: "The zk lock with the holder in its node: the same owner re-enters at once."},
	// The watchdog stops with a paused process, the hash expires, another owner takes it, and
	// the fence refuses the paused holder's write.
	{Strategy: StrategyRedisReentrant, Family: "redis", Safe: true, Lock: LockLease, Load: OutcomePass, Faults: leaseEnds,
		Summary: "Redisson’s RLock: owner → count in a hash, a watchdog renews it, the same owner re-enters at once; fenced."},
	{Strategy: StrategyMySQLVersionCapped, Family: "mysql", Safe: false, Lock: LockNone, Load: OutcomeUndersold,
		Summary: "Optimistic with capped retries: says sold out while stock remains (undersells)."},
	// No expiry: a paused holder only makes everyone wait, a dead one holds the lock for ever.
	{Strategy: StrategyMySQLLockTableNaive, Family: "mysql", Safe: false, Lock: LockLease, Load: OutcomePass,
		Faults:  map[Fault]Outcome{FaultPause: OutcomePass, FaultKill: OutcomeStall},
		Summary: "Lock row with no expiry and no fence: a holder that dies stalls the sale until a human deletes it."},
	// A holder paused past its TTL loses the key to another replica and, resumed, writes
	// unfenced. One that dies between SETNX and EXPIRE leaves a key that never expires.
	{Strategy: StrategyRedisSetnx, Family: "redis", Safe: false, Lock: LockLease, Load: OutcomePass,
		Faults:  map[Fault]Outcome{FaultPause: OutcomeOversold, FaultKill: OutcomeStall},
		Summary: "SETNX then EXPIRE, DEL to unlock, no fence: a paused holder deletes the next one’s lock and sells the same units again."},
	// A holder paused past its deadline is taken over and writes unfenced; a dead one's deadline
	// passes and the next GETSET takes over.
	{Strategy: StrategyRedisGetset, Family: "redis", Safe: false, Lock: LockLease, Load: OutcomePass,
		Faults:  map[Fault]Outcome{FaultPause: OutcomeOversold, FaultKill: OutcomePass},
		Summary: "A deadline by the client’s clock, taken over by GETSET, no fence: a skewed clock or a paused holder makes two holders."},
	// Unfenced, as Redlock is: a holder paused past the validity writes after the next holder;
	// and Kleppmann's scenario: servers restarted empty forget the lock and another client wins
	// a majority.
	{Strategy: StrategyRedlock, Family: "redis", Safe: false, Lock: LockLease, Load: OutcomePass,
		Faults:  map[Fault]Outcome{FaultPause: OutcomeOversold, FaultKill: OutcomePass, FaultRestart: OutcomeOversold},
		Summary: "Redlock: a majority of five Redis servers, no fence: servers restarted empty forget the lock and a second client wins it."},
	// Unfenced: the add's expiry frees a paused holder's lock; a restart forgets a live one.
	{Strategy: StrategyMemcached, Family: "memcached", Safe: false, Lock: LockLease, Load: OutcomePass,
		Faults:  map[Fault]Outcome{FaultPause: OutcomeOversold, FaultKill: OutcomePass, FaultRestart: OutcomeOversold},
		Summary: "Memcached add with an expiry, delete to unlock, no fence: a restart forgets the lock while its holder still works."},
	{Strategy: StrategyNone, Family: "control", Safe: false, Own: true, Lock: LockNone, Load: OutcomeOversold,
		Summary: "No lock and no condition: oversells under load, on purpose."},
}

// Strategies lists every strategy the code knows, in Catalog order.
var Strategies = StrategiesWhere(func(StrategyInfo) bool { return true })

// StrategiesWhere lists, in Catalog order, the strategies whose entry keep accepts.
func StrategiesWhere(keep func(StrategyInfo) bool) []Strategy {
	var out []Strategy
	for _, c := range Catalog {
		if keep(c) {
			out = append(out, c.Strategy)
		}
	}
	return out
}

// Info returns the catalog entry of s, and false for an unknown strategy.
func (s Strategy) Info() (StrategyInfo, bool) {
	for _, c := range Catalog {
		if c.Strategy == s {
			return c, true
		}
	}
	return StrategyInfo{}, false
}

// Safe reports whether the strategy guarantees neither oversell nor undersell nor a sale stalled
// for good. Unknown strategies are not safe.
func (s Strategy) Safe() bool {
	c, ok := s.Info()
	return ok && c.Safe
}

// ParseStrategy returns the strategy named s, or a *ValidationError.
func ParseStrategy(s string) (Strategy, error) {
	if _, ok := Strategy(s).Info(); ok {
		return Strategy(s), nil
	}
	return "", invalid("strategy", "must be one of %s", JoinStrategies(Strategies, ", "))
}

// JoinStrategies joins the names of sts with sep.
func JoinStrategies(sts []Strategy, sep string) string {
	names := make([]string, len(sts))
	for i, st := range sts {
		names[i] = string(st)
	}
	return strings.Join(names, sep)
}

// OwnSafe keeps the project's own safe strategies (mysql, redis, zk, redis-lua): the load test's
// and the bench's default set, the report's fixed colours.
func OwnSafe(c StrategyInfo) bool { return c.Own && c.Safe }
