// Package stock holds the Deductors, one file per strategy: the ways seckill-go takes units of a
// product's stock without ever handing out more than it has. Each runs the purchase transaction of
// package store; they differ only in what makes the read-check-write safe.
package stock
