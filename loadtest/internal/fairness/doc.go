// Package fairness is the waiting-room run of the load test (-waiting-room, issue #32): per
// strategy it puts a sale behind a waiting room with a pre-queue, once first come first served
// and once shuffled at the opening, sends a crowd of honest buyers and a minority of fast bots
// through the queue's public routes, and judges what the room promised from the visitors'
// evidence — the bots' units against their fair share, the places in line against the order of
// joining (Spearman's ρ, a χ² test of independence), the admissions per second against the
// setting, the estimated wait against the real one, every purchase without a valid pass refused
// — and the sale's audit as every mode does (attack).
//
// The statistics (stats.go) and the judge (judge.go) are pure functions of the visitors'
// records, tested with planted orders; nothing here reads the room's Redis keys: the judge sees
// what a visitor sees.
package fairness
