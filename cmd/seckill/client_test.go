package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seckill-go/seckill-go/api/client"
	"github.com/seckill-go/seckill-go/internal/app"
	"github.com/seckill-go/seckill-go/internal/itest"
)

// TestClientCommands runs the client commands (seckill products, buy, order, admin) against a
// started app, through the program's own Run as a terminal would: an admin creates a sale, the
// list shows it, a buyer buys (202, an order id) and reads the order, an admin resets it. Their
// requests are the generated client's (api/client), their errors the API's code and message.
func TestClientCommands(t *testing.T) {
	t.Parallel()
	a := newStack(t).start(t, nil)
	env := map[string]string{"SECKILL_ADMIN_TOKEN": adminToken}

	out := runCLI(t, env, "admin", "create", "-url", a.URL, "-name", "cli e2e", "-price", "1999", "-stock", "3",
		"-strategy", "mysql", "-listed", "-json")
	var p client.Product
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("admin create -json: %v: %s", err, out)
	}
	if p.Name != "cli e2e" || p.Stock != 3 || p.Strategy != "mysql" || p.PriceCents != 1999 {
		t.Fatalf("admin create made %+v", p)
	}
	id := strconv.FormatInt(p.ID, 10)

	// The list is each replica's board, refreshed at once on a sale change.
	itest.Eventually(t, 5*time.Second, func() (bool, string) {
		out := runCLI(t, nil, "products", "-url", a.URL)
		for line := range strings.Lines(out) {
			if f := strings.Fields(line); len(f) > 5 && f[0] == id {
				return strings.Contains(line, "cli e2e") && strings.Contains(line, "on_sale") &&
					strings.Contains(line, "3/3") && strings.Contains(line, "19.99"), "products:\n" + out
			}
		}
		return false, "products:\n" + out
	})

	out = runCLI(t, nil, "buy", "-url", a.URL, "-product", id, "-user", "cli-buyer", "-key", "cli-e2e-1", "-json")
	var rc client.Receipt
	if err := json.Unmarshal([]byte(out), &rc); err != nil || rc.OrderID == "" {
		t.Fatalf("buy -json: %v: %s", err, out)
	}
	if rc.ProductID != p.ID || rc.UserID != "cli-buyer" || rc.Quantity != 1 || rc.Status != "queued" {
		t.Errorf("receipt %+v", rc)
	}
	// The same key again: the first answer, replayed; in text, with the key and the next command.
	out = runCLI(t, nil, "buy", "-url", a.URL, "-product", id, "-user", "cli-buyer", "-key", "cli-e2e-1")
	for _, want := range []string{"accepted (the answer of an earlier purchase with this key): order " + rc.OrderID,
		"Idempotency-Key: cli-e2e-1", "seckill order -id " + rc.OrderID + " -user cli-buyer"} {
		if !strings.Contains(out, want) {
			t.Errorf("buy again: no %q in\n%s", want, out)
		}
	}
	// A new key (the default, generated) is a second purchase: the API's 409 and its code.
	wantAPIError(t, runCLIErr(t, nil, "buy", "-url", a.URL, "-product", id, "-user", "cli-buyer"), 409, client.ErrorCodeLimitReached)

	itest.Eventually(t, 30*time.Second, func() (bool, string) {
		out := runCLI(t, nil, "order", "-url", a.URL, "-id", rc.OrderID, "-user", "cli-buyer", "-json")
		var o client.Order
		if err := json.Unmarshal([]byte(out), &o); err != nil {
			return false, err.Error() + ": " + out
		}
		return o.OrderID == rc.OrderID && o.Status == client.OrderStatusConfirmed && o.AmountCents == 1999, "order: " + out
	})
	out = runCLI(t, nil, "order", "-url", a.URL, "-id", rc.OrderID, "-user", "cli-buyer")
	for _, want := range []string{rc.OrderID, "confirmed", "19.99", "pay before"} {
		if !strings.Contains(out, want) {
			t.Errorf("order: no %q in\n%s", want, out)
		}
	}
	// Another buyer's order answers as an absent one.
	wantAPIError(t, runCLIErr(t, nil, "order", "-url", a.URL, "-id", rc.OrderID, "-user", "someone-else"), 404, client.ErrorCodeNotFound)

	// Without -stock, a reset puts the initial stock back on sale.
	out = runCLI(t, env, "admin", "reset", "-url", a.URL, "-product", id)
	if !strings.HasPrefix(out, "reset: product "+id+` "cli e2e", on_sale, stock 3/3, 19.99, strategy mysql`) {
		t.Errorf("admin reset: %s", out)
	}
	out = runCLI(t, env, "admin", "reset", "-url", a.URL, "-product", id, "-stock", "5", "-json")
	if err := json.Unmarshal([]byte(out), &p); err != nil || p.Stock != 5 || p.InitialStock != 5 {
		t.Errorf("admin reset -stock 5 -json: %v: %s", err, out)
	}
	// The reset cleared the purchase: the same buyer buys again.
	if out := runCLI(t, nil, "buy", "-url", a.URL, "-product", id, "-user", "cli-buyer"); !strings.HasPrefix(out, "accepted: order ") {
		t.Errorf("buy after the reset: %s", out)
	}

	wantAPIError(t, runCLIErr(t, map[string]string{"SECKILL_ADMIN_TOKEN": "not-the-token"},
		"admin", "reset", "-url", a.URL, "-product", id), 401, client.ErrorCodeUnauthorized)
	if err := runCLIErr(t, nil, "admin", "reset", "-url", a.URL, "-product", id); err == nil || !strings.Contains(err.Error(), "SECKILL_ADMIN_TOKEN") {
		t.Errorf("admin reset without a token: %v", err)
	}
}

// runCLI runs seckill with args and the environment env, and returns what it printed; it fails
// the test if the command fails.
func runCLI(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	out, errOut, err := cli(env, args...)
	if err != nil {
		t.Fatalf("seckill %s: %v\n%s", strings.Join(args, " "), err, errOut)
	}
	return out
}

// runCLIErr runs seckill with args and the environment env, a command that must fail, and
// returns its error.
func runCLIErr(t *testing.T, env map[string]string, args ...string) error {
	t.Helper()
	out, _, err := cli(env, args...)
	if err == nil {
		t.Fatalf("seckill %s succeeded: %s", strings.Join(args, " "), out)
	}
	return err
}

func cli(env map[string]string, args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = app.Run(ctx, args, func(k string) string { return env[k] }, &out, &errOut, app.Options{})
	return out.String(), errOut.String(), err
}

// wantAPIError checks that err is the API's error with this status and code.
func wantAPIError(t *testing.T, err error, status int, code client.ErrorCode) {
	t.Helper()
	var e *client.APIError
	if !errors.As(err, &e) || e.Status != status || e.Code != code || e.Message == "" {
		t.Errorf("got the error %v; want the API's %d %s", err, status, code)
	}
}
