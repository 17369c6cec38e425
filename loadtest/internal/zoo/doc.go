// Package zoo is the lock zoo (make zoo, -zoo): every strategy of the catalog through the same
// load, then its lock holder paused past its lease, SIGKILLed, and the servers of the locks
// without persistence restarted during a hold; one matrix set against what the write-ups say
// each lock does (the registry's expectations).
package zoo
