package zoo

import (
	"testing"

	"github.com/seckill-go/seckill-go/loadtest/internal/yardstick"
)

// TestMain lets the test binary be the bare gin child of the yardsticks.
func TestMain(m *testing.M) { yardstick.Main(m.Run) }
