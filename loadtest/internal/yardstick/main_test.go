package yardstick

import (
	"fmt"
	"os"
	"testing"
)

// TestMain lets the test binary be the bare gin child of StartBareGin.
func TestMain(m *testing.M) {
	if IsChild(os.Getenv) {
		if err := RunChild(os.Getenv, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	os.Exit(m.Run())
}
