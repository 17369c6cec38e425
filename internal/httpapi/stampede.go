package httpapi

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/stampede"
)

// Stampedes runs the admin's demo load bursts; *stampede.Runner implements it.
type Stampedes interface {
	Start(ctx context.Context, p stampede.Plan) (stampede.Progress, error)
	Progress(ctx context.Context, id string) (stampede.Progress, error)
	MaxBuyers() int
}

// LiveRates reads a product's recent per-second purchase rates across the cluster;
// *livestats.Recorder implements it.
type LiveRates interface {
	Rates(ctx context.Context, productID int64) (sale.Rates, error)
}

// startStampede starts N simulated buyers on a product, after resetting it when the body gives a
// strategy or a stock. 202 with the progress so far; 409 while another stampede runs here.
func (h *handlers) startStampede(c *gin.Context) {
	id, err := productID(c)
	if err != nil {
		h.respondError(c, err)
		return
	}
	var body stampedeRequestJSON
	if err := decodeJSON(c.Request.Body, &body); err != nil {
		h.respondError(c, err)
		return
	}
	plan, err := h.stampedePlan(id, body)
	if err != nil {
		h.respondError(c, err)
		return
	}
	p, err := h.stampedes.Start(c.Request.Context(), plan)
	if err != nil {
		h.respondError(c, err)
		return
	}
	c.Header("Location", "/api/v1/admin/stampedes/"+p.ID)
	c.JSON(http.StatusAccepted, toStampedeJSON(p))
}

// stampedePlan validates the request and returns the plan. Its Prepare finds the product (404
// before anything runs) and, when asked, resets it through the reset use case: the stock and
// strategy default to the product's initial stock and current strategy.
func (h *handlers) stampedePlan(id int64, body stampedeRequestJSON) (stampede.Plan, error) {
	if body.Buyers == nil {
		return stampede.Plan{}, &sale.ValidationError{Field: "buyers", Reason: "is required"}
	}
	if n, most := *body.Buyers, h.stampedes.MaxBuyers(); n < 1 || n > most {
		return stampede.Plan{}, &sale.ValidationError{Field: "buyers", Reason: "must be between 1 and " + itoa(int64(most))}
	}
	if body.Strategy != "" {
		if _, err := sale.ParseStrategy(body.Strategy); err != nil {
			return stampede.Plan{}, err
		}
	}
	reset := body.Strategy != "" || body.Stock != nil
	prepare := func(ctx context.Context) error {
		p, err := h.sales.Product(ctx, id)
		if err != nil || !reset {
			return err
		}
		r := sale.Reset{Stock: p.InitialStock, Strategy: sale.Strategy(body.Strategy)}
		if body.Stock != nil {
			r.Stock = *body.Stock
		}
		_, err = h.sales.ResetProduct(ctx, id, r)
		return err
	}
	return stampede.Plan{ProductID: id, Buyers: *body.Buyers, Prepare: prepare}, nil
}

func (h *handlers) getStampede(c *gin.Context) {
	p, err := h.stampedes.Progress(c.Request.Context(), c.Param("stampede_id"))
	if err != nil {
		h.respondError(c, err)
		return
	}
	c.JSON(http.StatusOK, toStampedeJSON(p))
}
