package yardstick

import "testing"

// TestMain lets the test binary be the bare gin child of StartBareGin.
func TestMain(m *testing.M) { Main(m.Run) }
