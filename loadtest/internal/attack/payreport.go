package attack

// PaymentReport is the payment phase of one strategy.
type PaymentReport struct {
	// Skipped says why the strategy had no payment phase (-pay-skip); empty when it had one.
	Skipped string `json:"skipped,omitempty"`
	// WindowSeconds is the payment window the replicas gave the first wave's orders, as the orders
	// show it: the least expires_at − the moment the client had the purchase's 202 (the window,
	// plus the order's way through the queue, less the answer's way back).
	WindowSeconds float64 `json:"window_seconds"`
	// First is the payments of the first wave's winners.
	First PayTally `json:"first_wave"`
	// Expired and Returned are the first wave's units in expired orders once the window ran out,
	// and of them the units back in stock (from the database).
	Expired  int `json:"expired"`
	Returned int `json:"returned"`
	// WaitSeconds is how long the run waited, after the payments, for every unpaid unit to be
	// back in stock.
	WaitSeconds float64 `json:"wait_seconds"`
	// Second is the second wave: new buyers for the units that came back.
	Second WaveReport `json:"second_wave"`
}

// WaveReport is the second wave of buyers.
type WaveReport struct {
	// Units were on sale when it began (the database's stock: the units that came back).
	Units    int `json:"units"`
	Buyers   int `json:"buyers"`
	Requests int `json:"requests"`
	// Accepted counts the distinct orders acknowledged with a 202.
	Accepted int            `json:"accepted"`
	Outcomes map[string]int `json:"outcomes"`
	// Pay is the payments of its winners, who all pay.
	Pay PayTally `json:"pay"`
}

// PayTally is what the payers of one wave did and were told.
type PayTally struct {
	// Orders are the wave's winners' orders, Payers the buyers among them who set out to pay.
	Orders int `json:"orders"`
	Payers int `json:"payers"`
	// Paid counts the orders answered 200 paid.
	Paid int `json:"paid"`
	// Declined counts the 402 payment_declined answers: each is followed by a payment with a new
	// Idempotency-Key (the declined key stays declined).
	Declined int `json:"declined"`
	// Retried counts the payments sent again with the same key after no answer, a 5xx, a 429 or
	// a 409 that says to wait (payment_in_progress, order_not_confirmed).
	Retried int `json:"retried"`
	// Late counts the payers whose order expired before their payment got through (409
	// order_expired, or already expired when they came to pay): not a fault, a window too short
	// for the run.
	Late int `json:"late"`
	// GaveUp counts the payments still of unknown outcome after payTries tries of one key, or
	// declined maxPayKeys times.
	GaveUp int `json:"gave_up"`
	// Answers counts every answer to a payment by outcome.
	Answers map[string]int `json:"answers"`
	// Problems are the answers no payment should get, in words (violations).
	Problems []string `json:"-"`
}
