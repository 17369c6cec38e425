// Package payphase is the load test's payment phase (-pay): after an attack a share of the
// winners pay and the others let the payment window run out; a second wave of new buyers buys
// the units that came back, and its winners pay; the database is audited at the end.
package payphase
