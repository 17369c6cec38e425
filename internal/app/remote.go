package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/seckill-go/seckill-go/api/client"
)

// The commands below are clients of a running API, through api/client (generated from the
// contract): what a person at a terminal would otherwise do with curl. They read no SECKILL_*
// setting but the admin token, and reach no database, broker or lock service.

// The default addresses are the local stack's (make up): the public one, and the operations one,
// which alone serves the admin API.
const (
	defaultPublicURL = "http://127.0.0.1:8080"
	defaultOpsURL    = "http://127.0.0.1:8079"
)

// remoteTimeout bounds each command's one or two requests.
const remoteTimeout = 30 * time.Second

// remoteFlags are the flags every client command has.
type remoteFlags struct {
	url  string
	json bool
}

func (r *remoteFlags) register(fs *flag.FlagSet, defaultURL string) {
	fs.StringVar(&r.url, "url", defaultURL, "the API's base URL")
	fs.BoolVar(&r.json, "json", false, "print the API's answer as it is (JSON) instead of text")
}

// newFlagSet returns a flag set that reports to stderr, with a usage line before the flags.
func newFlagSet(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage:", usage)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args and refuses positional arguments: every value is a flag's.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("%s: unexpected argument %q (every value is a flag's)", fs.Name(), fs.Arg(0))
	}
	return nil
}

// newAPIClient returns a client of the API at base, with the bearer token, if any, on every
// request.
func newAPIClient(base, bearer string) *client.ClientWithResponses {
	return client.New(base, &http.Client{Timeout: remoteTimeout}, bearer)
}

// show ends a command on the API's answer rsp, its body read into body: the API's error unless
// its status is want, else the answer as it came with -json, or text's.
func (r remoteFlags) show(stdout io.Writer, rsp *http.Response, body []byte, want int, text func() error) error {
	if err := answered(rsp, body, want); err != nil {
		return err
	}
	if r.json {
		return writeRaw(stdout, body)
	}
	return text()
}

// answered returns nil if the answer has the status wanted, else the API's error (the code and
// message of a *client.APIError).
func answered(rsp *http.Response, body []byte, want int) error {
	if rsp.StatusCode == want {
		return nil
	}
	return client.ErrorOf(rsp, body)
}

// products prints the listed products: seckill products [-url U] [-json].
func products(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var r remoteFlags
	fs := newFlagSet("seckill products", "seckill products [-url "+defaultPublicURL+"] [-json]  (the listed products)", stderr)
	r.register(fs, defaultPublicURL)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	rsp, err := newAPIClient(r.url, "").ListProductsWithResponse(ctx, nil)
	if err != nil {
		return err
	}
	return r.show(stdout, rsp.HTTPResponse, rsp.Body, http.StatusOK, func() error {
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tSTATE\tSTOCK\tPRICE\tSTRATEGY\tADMISSION\tSALE")
		for _, p := range rsp.JSON200.Products {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%d/%d\t%s\t%s\t%s\t%s\n", p.ID, p.Name, p.State, p.Stock, p.InitialStock,
				price(p.PriceCents), p.Strategy, p.Admission.Mode, window(p.SaleStartsAt, p.SaleEndsAt))
		}
		return tw.Flush()
	})
}

// buy sends one purchase and prints its receipt:
// seckill buy -product N -user U [-quantity 1] [-key K] [-pass P] [-buyer-token T] [-url U] [-json].
func buy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var r remoteFlags
	fs := newFlagSet("seckill buy", "seckill buy -product N -user U [-quantity 1] [-key K] [-url "+defaultPublicURL+"] [-json]  (one purchase; prints its receipt)", stderr)
	r.register(fs, defaultPublicURL)
	product := fs.Int64("product", 0, "the product's id (required)")
	user := fs.String("user", "", "the buyer's user id (required without -buyer-token)")
	quantity := fs.Int("quantity", 1, "units to buy, at most the product's per-user limit")
	key := fs.String("key", "", "the Idempotency-Key (default: a new random one, printed; send it again to retry the same purchase)")
	pass := fs.String("pass", "", "the Admission-Pass, in a waiting-room sale (the admitted ticket's pass)")
	token := fs.String("buyer-token", "", "a buyer token, where the server verifies them (seckill token USER)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *product <= 0 || (*user == "" && *token == "") {
		fs.Usage()
		return errors.New("buy: give -product and -user")
	}
	if *key == "" {
		k, err := newIdempotencyKey()
		if err != nil {
			return err
		}
		*key = k
	}
	c := newAPIClient(r.url, *token)
	params := &client.PurchaseParams{IdempotencyKey: key}
	if *pass != "" {
		params.AdmissionPass = pass
	}
	body := client.PurchaseRequest{Quantity: quantity}
	if *user != "" {
		body.UserID = user
	}
	// When the purchase may be worth sending again (no answer, or back-pressure), the error
	// says how: with the same key, it cannot buy twice.
	retry := func(err error) error { return fmt.Errorf("%w; to retry the same purchase: -key %s", err, *key) }
	rsp, err := c.PurchaseWithResponse(ctx, *product, params, body)
	if err != nil {
		return retry(err)
	}
	if err := answered(rsp.HTTPResponse, rsp.Body, http.StatusAccepted); err != nil {
		if s := rsp.StatusCode(); s == http.StatusTooManyRequests || s == http.StatusServiceUnavailable {
			return retry(err)
		}
		return err
	}
	if r.json {
		return writeRaw(stdout, rsp.Body)
	}
	rc := rsp.JSON202
	replayed := ""
	if rsp.HTTPResponse.Header.Get("Idempotent-Replayed") == "true" {
		replayed = " (the answer of an earlier purchase with this key)"
	}
	fmt.Fprintf(stdout, "accepted%s: order %s, %d of product %d for %s (strategy %s), %s\n",
		replayed, rc.OrderID, rc.Quantity, rc.ProductID, rc.UserID, rc.Strategy, rc.Status)
	fmt.Fprintf(stdout, "Idempotency-Key: %s\n", *key)
	fmt.Fprintf(stdout, "the order: seckill order -id %s -user %s\n", rc.OrderID, rc.UserID)
	return nil
}

// newIdempotencyKey returns a random key, distinct for every purchase the command sends.
func newIdempotencyKey() (string, error) {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("an Idempotency-Key: %w", err)
	}
	return "cli-" + hex.EncodeToString(b), nil
}

// order prints one of the buyer's orders: seckill order -id O -user U [-buyer-token T] [-url U] [-json].
func order(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var r remoteFlags
	fs := newFlagSet("seckill order", "seckill order -id O -user U [-url "+defaultPublicURL+"] [-json]  (the buyer's order)", stderr)
	r.register(fs, defaultPublicURL)
	id := fs.String("id", "", "the order's id (required; a receipt's order_id)")
	user := fs.String("user", "", "its buyer's user id (required without -buyer-token): an order is its buyer's only")
	token := fs.String("buyer-token", "", "a buyer token, where the server verifies them (seckill token USER)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *id == "" || (*user == "" && *token == "") {
		fs.Usage()
		return errors.New("order: give -id and -user")
	}
	var params client.GetOrderParams
	if *user != "" {
		params.UserID = user
	}
	rsp, err := newAPIClient(r.url, *token).GetOrderWithResponse(ctx, *id, &params)
	if err != nil {
		return err
	}
	return r.show(stdout, rsp.HTTPResponse, rsp.Body, http.StatusOK, func() error { return printOrder(stdout, rsp.JSON200) })
}

// printOrder prints an order as its buyer reads it, a field a line.
func printOrder(w io.Writer, o *client.Order) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "order\t%s\n", o.OrderID)
	fmt.Fprintf(tw, "status\t%s\n", o.Status)
	fmt.Fprintf(tw, "product\t%d\n", o.ProductID)
	fmt.Fprintf(tw, "buyer\t%s\n", o.UserID)
	fmt.Fprintf(tw, "quantity\t%d\n", o.Quantity)
	fmt.Fprintf(tw, "amount\t%s\n", price(o.AmountCents))
	for _, t := range []struct {
		name string
		at   *time.Time
	}{{"pay before", o.ExpiresAt}, {"paid at", o.PaidAt}, {"closed at", o.ClosedAt}} {
		if t.at != nil {
			fmt.Fprintf(tw, "%s\t%s\n", t.name, t.at.UTC().Format(time.RFC3339))
		}
	}
	if o.PaymentID != nil {
		fmt.Fprintf(tw, "payment\t%s\n", *o.PaymentID)
	}
	if o.Returned {
		fmt.Fprintf(tw, "units\tback on sale\n")
	}
	if o.Refusal != nil {
		msg := ""
		if o.Message != nil {
			msg = ": " + *o.Message
		}
		fmt.Fprintf(tw, "refused\t%s%s\n", *o.Refusal, msg)
	}
	return tw.Flush()
}

// admin runs an admin command: seckill admin create|reset [flags].
func admin(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	const usage = "usage: seckill admin create|reset [flags]  (the admin API; the token from -token or SECKILL_ADMIN_TOKEN)\n" +
		"  create  create a product:      seckill admin create -name N -price CENTS -stock N [-strategy S] [-per-user-limit 1] [-starts T] [-ends T] [-listed=false]\n" +
		"  reset   reset a product's sale: seckill admin reset -product N [-stock N] [-strategy S]\n" +
		"Run 'seckill admin <command> -h' for its flags.\n"
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("admin: give a command, create or reset")
	}
	switch args[0] {
	case "create":
		return adminCreate(ctx, args[1:], getenv, stdout, stderr)
	case "reset":
		return adminReset(ctx, args[1:], getenv, stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stderr, usage)
		return flag.ErrHelp
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("admin: unknown command %q", args[0])
}

// adminFlags are the flags of every admin command: the remote ones, on the operations address,
// and the admin token.
type adminFlags struct {
	remoteFlags
	token string
}

func (a *adminFlags) register(fs *flag.FlagSet, getenv func(string) string) {
	a.remoteFlags.register(fs, defaultOpsURL)
	fs.StringVar(&a.token, "token", getenv("SECKILL_ADMIN_TOKEN"), "the admin token (default $SECKILL_ADMIN_TOKEN)")
}

func (a *adminFlags) client() (*client.ClientWithResponses, error) {
	if a.token == "" {
		return nil, errors.New("admin: give the admin token, -token or SECKILL_ADMIN_TOKEN")
	}
	return newAPIClient(a.url, a.token), nil
}

// timeFlag is an optional RFC 3339 time.
type timeFlag struct{ t *time.Time }

func (f *timeFlag) String() string {
	if f.t == nil {
		return ""
	}
	return f.t.Format(time.RFC3339)
}

func (f *timeFlag) Set(s string) error {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return errors.New("not an RFC 3339 time (2026-11-29T20:00:00Z)")
	}
	f.t = &t
	return nil
}

// adminCreate creates a product and prints it.
func adminCreate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var a adminFlags
	fs := newFlagSet("seckill admin create", "seckill admin create -name N -price CENTS -stock N [-strategy S] [flags]  (a product, its sale open now for 24 h unless told)", stderr)
	a.register(fs, getenv)
	name := fs.String("name", "", "the product's name (required)")
	priceCents := fs.Int64("price", 0, "the price in cents")
	stock := fs.Int("stock", -1, "the units on sale (required)")
	strategy := fs.String("strategy", "", "the stock strategy (default: the server's SECKILL_DEFAULT_STRATEGY; the list: GET /api/v1/strategies)")
	perUser := fs.Int("per-user-limit", 0, "units a buyer may buy (default 1)")
	listed := fs.Bool("listed", true, "on the storefront's list")
	var starts, ends timeFlag
	fs.Var(&starts, "starts", "the sale's start, RFC 3339 (default now)")
	fs.Var(&ends, "ends", "the sale's end, RFC 3339 (default the start + 24 h)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *name == "" || *stock < 0 {
		fs.Usage()
		return errors.New("admin create: give -name and -stock")
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	body := client.NewProduct{Name: name, PriceCents: *priceCents, Stock: *stock, Listed: listed,
		SaleStartsAt: starts.t, SaleEndsAt: ends.t}
	if *strategy != "" {
		body.Strategy = strategy
	}
	if *perUser != 0 {
		body.PerUserLimit = perUser
	}
	rsp, err := c.AdminCreateProductWithResponse(ctx, body)
	if err != nil {
		return err
	}
	return a.show(stdout, rsp.HTTPResponse, rsp.Body, http.StatusCreated, func() error { return printProduct(stdout, "created", rsp.JSON201) })
}

// adminReset resets a product's sale and prints the product.
func adminReset(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var a adminFlags
	fs := newFlagSet("seckill admin reset", "seckill admin reset -product N [-stock N] [-strategy S]  (clears its reservations, orders and keys)", stderr)
	a.register(fs, getenv)
	product := fs.Int64("product", 0, "the product's id (required)")
	stock := fs.Int("stock", -1, "the units on sale anew (default: its initial stock)")
	strategy := fs.String("strategy", "", "a new stock strategy (default: its own)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *product <= 0 {
		fs.Usage()
		return errors.New("admin reset: give -product")
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	if *stock < 0 {
		// A reset needs its stock: the product's initial one, read as anyone reads it.
		p, err := c.GetProductWithResponse(ctx, *product, nil)
		if err != nil {
			return err
		}
		if err := answered(p.HTTPResponse, p.Body, http.StatusOK); err != nil {
			return fmt.Errorf("the product's initial stock: %w", err)
		}
		*stock = p.JSON200.InitialStock
	}
	body := client.Reset{Stock: *stock}
	if *strategy != "" {
		body.Strategy = strategy
	}
	rsp, err := c.AdminResetProductWithResponse(ctx, *product, body)
	if err != nil {
		return err
	}
	return a.show(stdout, rsp.HTTPResponse, rsp.Body, http.StatusOK, func() error { return printProduct(stdout, "reset", rsp.JSON200) })
}

// printProduct prints a product as the admin API answers it, on one line after what was done.
func printProduct(w io.Writer, done string, p *client.Product) error {
	_, err := fmt.Fprintf(w, "%s: product %d %q, %s, stock %d/%d, %s, strategy %s, per user %d, admission %s, %s\n",
		done, p.ID, p.Name, p.State, p.Stock, p.InitialStock, price(p.PriceCents), p.Strategy, p.PerUserLimit,
		p.Admission.Mode, window(p.SaleStartsAt, p.SaleEndsAt))
	return err
}

// price writes cents as units and hundredths.
func price(cents int64) string {
	sign := ""
	if cents < 0 {
		sign, cents = "-", -cents
	}
	return fmt.Sprintf("%s%d.%02d", sign, cents/100, cents%100)
}

// window writes a sale's window in UTC.
func window(start, end time.Time) string {
	const layout = "2006-01-02 15:04"
	return start.UTC().Format(layout) + " to " + end.UTC().Format(layout) + " UTC"
}

// writeRaw writes the API's answer as it came, ending in a newline.
func writeRaw(w io.Writer, body []byte) error {
	if _, err := w.Write(body); err != nil {
		return err
	}
	if !strings.HasSuffix(string(body), "\n") {
		_, err := io.WriteString(w, "\n")
		return err
	}
	return nil
}
