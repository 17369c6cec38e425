package sale

import "errors"

// ErrPoison marks a write the database refused for the values it was given (a number out of a
// column's range, a string too long or in a character set the column cannot hold, a foreign key
// that names nothing), as opposed to an outage: the same write fails the same way however often
// it is retried. A background loop that meets it in a batch tries the batch's halves, down to the
// row that causes it, and parks that row (Parked) instead of retrying everyone behind it for
// ever. Adapters wrap only errors they know to be of this kind; anything else is retried.
var ErrPoison = errors.New("refused for its values")

// Parked is a message or a stream entry that a background loop could never apply, set aside once
// with what is needed to see, fix and replay it (docs/order-pipeline.md).
type Parked struct {
	// Loop names the loop that parked it: consumer, event_consumer or persister.
	Loop string
	// Source is where it came from: a Kafka topic, or a Redis stream's key; Position where in it:
	// "<partition>:<offset>", or a stream entry's id (with "#<line>" for one reservation of a
	// batch entry). Loop, Source and Position name it once: parking it again changes nothing.
	Source, Position string
	// OrderID and ProductID are the order and product it names, when it names them ("" and 0 if
	// it could not be read that far).
	OrderID   string
	ProductID int64
	// Payload is the message as it came, to replay it from.
	Payload []byte
	// Reason is why it was parked.
	Reason string
}
