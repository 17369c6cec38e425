//go:build !linux

package viewers

import "context"

// startReactors: the reactors need epoll; elsewhere every stream has a goroutine of its own.
func (c *Crowd) startReactors(context.Context) (bool, error) { return false, nil }
