package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// api is the little of the app's HTTP API the bench needs besides the purchases: create a
// product, buy once, read a product's stats.
type api struct {
	base, token string
	client      *http.Client
}

func newAPI(base, token string) *api {
	return &api{base: base, token: token, client: &http.Client{Timeout: 30 * time.Second}}
}

// createProduct puts a product on sale now, for a day, and returns its id.
func (a *api) createProduct(ctx context.Context, name, strategy string, stock int) (int64, error) {
	var p struct {
		ID int64 `json:"id"`
	}
	body := map[string]any{"name": name, "price_cents": 100, "stock": stock, "strategy": strategy, "per_user_limit": 1}
	if err := a.call(ctx, http.MethodPost, "/api/v1/admin/products", body, http.StatusCreated, &p); err != nil {
		return 0, err
	}
	if p.ID <= 0 {
		return 0, fmt.Errorf("create product %q: the answer has no id", name)
	}
	return p.ID, nil
}

// purchase buys one unit for user and expects a 202.
func (a *api) purchase(ctx context.Context, productID int64, user string) error {
	var receipt struct {
		OrderID string `json:"order_id"`
	}
	path := fmt.Sprintf("/api/v1/products/%d/purchase", productID)
	return a.call(ctx, http.MethodPost, path, map[string]any{"user_id": user, "quantity": 1}, http.StatusAccepted, &receipt)
}

// stats is the part of GET /api/v1/products/{id}/stats the drain watches.
type stats struct {
	InitialStock    int `json:"initial_stock"`
	Stock           int `json:"stock"`
	Reserved        int `json:"reserved"`
	OrdersConfirmed int `json:"orders_confirmed"`
	ConfirmedUnits  int `json:"confirmed_units"`
	Oversold        int `json:"oversold"`
}

func (a *api) stats(ctx context.Context, productID int64) (stats, error) {
	var s stats
	err := a.call(ctx, http.MethodGet, fmt.Sprintf("/api/v1/products/%d/stats", productID), nil, http.StatusOK, &s)
	return s, err
}

// call sends body as JSON (when not nil) with the admin token and decodes a want-status answer
// into out.
func (a *api) call(ctx context.Context, method, path string, body any, want int, out any) error {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	req.Header.Set("Content-Type", "application/json")
	res, err := a.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if res.StatusCode != want {
		return fmt.Errorf("%s %s: %s %s", method, path, res.Status, bytes.TrimSpace(data))
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	return nil
}
