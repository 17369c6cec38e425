// Package migrations holds the versioned SQL schema of seckill-go, embedded in the binary so that
// `seckill migrate` needs no files on disk. The SQL must run unchanged on MySQL 8 and MariaDB 10.11.
package migrations

import "embed"

// FS holds every migration, named NNNNN_description.sql in goose's format.
//
//go:embed *.sql
var FS embed.FS
