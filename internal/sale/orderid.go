package sale

// ValidateOrderID returns a *ValidationError unless id could be an order id (the format of
// Options.NewOrderID). The HTTP layer refuses such an id with 400 before anything is looked up,
// so that 404 means one thing only: no order of this buyer's has this id.
func ValidateOrderID(id string) error {
	if !plausibleOrderID(id) {
		return invalid("order_id", "must be 1 to %d printable ASCII characters without spaces", MaxOrderIDLen)
	}
	return nil
}
