// Package proof is the load test proper (go run ./loadtest): each strategy attacked over the
// replicas, optionally watched by a crowd of viewers (-viewers), with a replica killed during
// the attack (-chaos kill) and the payment phase after it (-pay), every one audited; its report
// in Markdown, JSON and an HTML page with charts.
package proof
