package challenge

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"strconv"
)

// ErrNoSolution: no number up to the challenge's MaxNumber solves it (not one of ours).
var ErrNoSolution = errors.New("challenge: no number up to its maxnumber solves it")

// Solve finds the number that solves c by brute force from 0, as the widget does, and returns
// the solution to send (Solution). It is the tests' and the load test's visitor: a bot pays the
// same price, MaxNumber/2 SHA-256 on average. It stops when ctx is done.
func Solve(ctx context.Context, c Challenge) (string, error) {
	want, err := hexChallenge(c)
	if err != nil {
		return "", err
	}
	buf := make([]byte, 0, len(c.Salt)+20)
	buf = append(buf, c.Salt...)
	for n := int64(0); n <= c.MaxNumber; n++ {
		if n&0xfff == 0 && ctx.Err() != nil {
			return "", ctx.Err()
		}
		sum := sha256.Sum256(strconv.AppendInt(buf, n, 10))
		if bytes.Equal(sum[:], want) {
			return Solution(c, n), nil
		}
	}
	return "", ErrNoSolution
}
