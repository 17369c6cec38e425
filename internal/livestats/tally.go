package livestats

// event is one purchase attempt, as queued by ObserveProductPurchase.
type event struct {
	product  int64
	sec      int64 // Unix second in which the attempt ended
	accepted bool
}

// bucket is one product's second.
type bucket struct {
	product int64
	sec     int64
}

// bucketCounts are the attempts and accepted purchases of one bucket.
type bucketCounts struct {
	requests int64
	accepted int64
}

// tally aggregates events between two flushes: one entry per product and second, however many
// purchases there were.
type tally map[bucket]bucketCounts

func (t tally) add(e event) {
	b := bucket{product: e.product, sec: e.sec}
	c := t[b]
	c.requests++
	if e.accepted {
		c.accepted++
	}
	t[b] = c
}

// events returns how many events the tally holds.
func (t tally) events() int {
	n := 0
	for _, c := range t {
		n += int(c.requests)
	}
	return n
}
