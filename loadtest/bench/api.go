package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/seckill-go/seckill-go/loadtest/internal/appapi"
)

// api is the little of the app's HTTP API the bench needs besides the purchases: create a
// product, buy once, read a product's stats.
type api struct {
	*appapi.Client
	// publicStats is set once the admin stats route answered 404: a server from before the
	// read side (#28), whose public stats were the audit's.
	publicStats bool
}

func newAPI(base, token string) *api { return &api{Client: appapi.New(base, token)} }

// createProduct puts a product on sale now, for a day, and returns its id.
func (a *api) createProduct(ctx context.Context, name, strategy string, stock int) (int64, error) {
	var p struct {
		ID int64 `json:"id"`
	}
	body := map[string]any{"name": name, "price_cents": 100, "stock": stock, "strategy": strategy, "per_user_limit": 1, "listed": false}
	if err := a.Call(ctx, http.MethodPost, "/api/v1/admin/products", body, http.StatusCreated, &p); err != nil {
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
	return a.Call(ctx, http.MethodPost, path, map[string]any{"user_id": user, "quantity": 1}, http.StatusAccepted, &receipt)
}

// stats is the part of the operators' audit of a product (GET /api/v1/admin/products/{id}/stats)
// the drain watches.
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
	if !a.publicStats {
		err := a.Call(ctx, http.MethodGet, fmt.Sprintf("/api/v1/admin/products/%d/stats", productID), nil, http.StatusOK, &s)
		var se *appapi.StatusError
		if !errors.As(err, &se) || se.Status != http.StatusNotFound {
			return s, err
		}
		a.publicStats = true
	}
	err := a.Call(ctx, http.MethodGet, fmt.Sprintf("/api/v1/products/%d/stats", productID), nil, http.StatusOK, &s)
	return s, err
}
