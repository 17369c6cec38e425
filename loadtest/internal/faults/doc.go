// Package faults is the fault run (make chaos, -faults): one step per fault, each under its own
// paced load of every strategy, the fault injected and undone mid-step, the step audited (no
// oversell, nothing lost, the order queue caught up, the lifecycle events tallied). The zoo plays
// its lock holders' faults through the same steps (RunStep, Env).
package faults
