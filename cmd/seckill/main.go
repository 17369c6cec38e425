// Command seckill is the seckill-go binary: the flash-sale HTTP API with its outbox relay and
// order consumer (serve), the relay and consumer alone (worker), the schema migrations (migrate)
// and the demo products (seed); and, at a terminal, a client of a running API (products, buy,
// order, admin), on the client generated from the contract. Every setting comes from SECKILL_*
// variables or flags; run `seckill serve -h` for the list. The program itself is internal/app;
// this is its thin main.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/seckill-go/seckill-go/internal/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := app.Run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr, app.Options{})
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "seckill:", err)
		}
		os.Exit(1)
	}
}
