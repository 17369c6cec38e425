// Package attack is the engine every mode of the load test drives: it puts a product on sale
// through the admin API, plans the buyers' requests, sends them (vegeta as a library), settles
// the answers whose outcome was unknown, waits for the order queue, and judges the strategy from
// evidence — the answers and the database read with plain SQL. It also holds the report's types
// and their files, the yardsticks of the ratios, and the flags every mode shares (Options).
//
// It decides nothing about faults, crowds or payments: the modes above it (proof, faults, zoo,
// payphase) do, and call it.
package attack
