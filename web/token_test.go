package web_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/seckill-go/seckill-go/internal/apptest"
	"github.com/seckill-go/seckill-go/internal/buyer"
)

// TestStorefrontBuyerToken: against a replica that verifies buyer tokens, a buyer who only names
// themself is told the shop verifies its buyers, and buys once they paste a token; the page shows
// the token's subject as the buyer, and the order is theirs.
func TestStorefrontBuyerToken(t *testing.T) {
	chromium := chromiumPath(t)
	key := "the storefront test's buyer key, 32 bytes or more"
	stack := apptest.NewStack(t)
	a := stack.Start(t, map[string]string{"SECKILL_BUYER_JWT_HMAC_KEY": key})
	admin := apptest.Client{URL: a.URL, Token: apptest.AdminToken}
	product := admin.CreateProduct(t, map[string]any{"name": "Verified buyers only", "price_cents": 999, "stock": 3})
	signer, err := buyer.NewSigner(buyer.Config{HMACKey: []byte(key)})
	if err != nil {
		t.Fatal(err)
	}
	token, err := signer.Token("carol-token", 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}

	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.UserDataDir(t.TempDir()), chromedp.Flag("disable-background-networking", true), chromedp.WindowSize(1280, 800))...)
	t.Cleanup(cancelAlloc)
	browserCtx, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(cancelBrowser)
	ctx, cancel := context.WithTimeout(browserCtx, 90*time.Second)
	defer cancel()
	p := page{t, ctx}
	buy := card(product) + " .btn-buy"

	p.do("open the storefront", chromedp.Navigate(a.URL+"/"))
	p.waitJS("the product's card", fmt.Sprintf(`!!document.querySelector('%s') && !document.querySelector('%s').disabled`, buy, buy), 15*time.Second)
	p.do("buy with a name only", chromedp.Click(chromedp.CSS(buy)))
	p.waitJS("the shop asks for a token", fmt.Sprintf(`document.querySelector('%s').innerText.includes('verifies its buyers')`, card(product)), 15*time.Second)

	p.do("paste the buyer token",
		chromedp.Click(chromedp.ID("buyer-edit")),
		chromedp.WaitVisible(chromedp.ID("buyer-input")),
		clearField("buyer-input"),
		setField("buyer-input", token),
		chromedp.SendKeys(chromedp.ID("buyer-input"), "\n"))
	p.waitJS("the token's subject as the buyer", `document.getElementById('buyer-id').textContent === 'carol-token (token)'`, 5*time.Second)
	p.waitJS("the buy button again", fmt.Sprintf(`!document.querySelector('%s').disabled`, buy), 10*time.Second)
	p.do("buy with the token", chromedp.Click(chromedp.CSS(buy)))
	p.waitJS("the order confirmed", fmt.Sprintf(`!!document.querySelector('%s .order-status[data-status="confirmed"]')`, card(product)), 30*time.Second)

	stats := apptest.Client{URL: a.URL, Token: apptest.AdminToken}.MustDo(t, "GET", fmt.Sprintf("/api/v1/admin/products/%d/stats", product), nil, nil)
	if stats.Num("orders_confirmed") != 1 {
		t.Fatalf("stats after the purchase: %s, want 1 confirmed order", stats.Raw)
	}
	if got := p.eval(`localStorage.getItem('seckill.buyerToken')`); !strings.HasPrefix(got, "eyJ") {
		t.Errorf("the token was not kept: %q", got)
	}
}
