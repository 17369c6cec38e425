// Package sale is the flash-sale domain: products on sale, the purchase use case and the rules that
// decide whether a buyer gets a unit (sale window, per-user limit, idempotent retries).
//
// It reaches storage, locks and queues only through the small interfaces declared here (Store,
// Deductor, Observer) and must never import an infrastructure package: no SQL, Redis, ZooKeeper,
// Kafka or HTTP in here.
package sale
