// Package yardstick measures this machine's own limits, the figures every result of the load
// test and of the bench is divided by: client and server share two cores here and absolute rates
// move ±40 % between runs, so a figure means something only as a ratio to a yardstick measured
// in the same run.
//
//   - R (RowRate): a raw single-row conditional UPDATE loop through database/sql, in autocommit,
//     on a table of the yardstick's own in a scratch database: what one hot row of MySQL
//     sustains without the app.
//   - The bare gin ceiling (StartBareGin): a gin handler that parses a purchase and answers 409
//     sold_out, in a process of its own: what the HTTP layer sustains without the app; and in the
//     same process the read ceiling, a GET of one product answered from a fixed rendering.
//   - Blast: the lean HTTP load client that measures both the ceiling and the app, so that a ratio
//     of the two compares like with like.
//
// It never touches the app's database, tables or products, and Blast only ever sends to loopback
// addresses.
package yardstick
