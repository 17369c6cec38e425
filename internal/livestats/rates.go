package livestats

import "github.com/seckill-go/seckill-go/internal/board"

// Rates counts the purchase attempts and the accepted purchases of one product in each of the
// last seconds, across every replica: the read side's board.Rates, which the board shows.
type Rates = board.Rates
