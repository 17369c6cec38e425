package httpapi

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/seckill-go/seckill-go/internal/livestats"
	"github.com/seckill-go/seckill-go/internal/sale"
	"github.com/seckill-go/seckill-go/internal/stampede"
)

// Stampedes runs the admin's demo load bursts; *stampede.Launcher implements it.
type Stampedes interface {
	Launch(ctx context.Context, req stampede.Request) (stampede.Progress, error)
	Progress(ctx context.Context, id string) (stampede.Progress, error)
}

// LiveRates reads a product's recent per-second purchase rates across the cluster;
// *livestats.Recorder implements it.
type LiveRates interface {
	Rates(ctx context.Context, productID int64) (livestats.Rates, error)
}

// startStampede starts N simulated buyers on a product, after resetting it when the body gives a
// strategy or a stock (the stampede.Launcher use case). 202 with the progress so far; 409 while
// another stampede runs here.
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
	if body.Buyers == nil {
		h.respondError(c, &sale.ValidationError{Field: "buyers", Reason: "is required"})
		return
	}
	p, err := h.stampedes.Launch(c.Request.Context(), stampede.Request{
		ProductID: id, Buyers: *body.Buyers, Strategy: body.Strategy, Stock: body.Stock,
	})
	if err != nil {
		h.respondError(c, err)
		return
	}
	c.Header("Location", "/api/v1/admin/stampedes/"+p.ID)
	c.JSON(http.StatusAccepted, toStampedeJSON(p))
}

func (h *handlers) getStampede(c *gin.Context) {
	p, err := h.stampedes.Progress(c.Request.Context(), c.Param("stampede_id"))
	if err != nil {
		h.respondError(c, err)
		return
	}
	c.JSON(http.StatusOK, toStampedeJSON(p))
}
