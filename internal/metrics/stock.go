package metrics

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill-go/seckill-go/internal/sale"
)

// ProductLister lists the products and their stock, and the units the returns still owe them;
// the store implements it.
type ProductLister interface {
	Products(ctx context.Context) ([]sale.Product, error)
	UnreturnedUnits(ctx context.Context, ids []int64) (map[int64]int, error)
}

// stockCollector reports every product's stock, initial stock and units not yet returned at
// scrape time, read from the database (two small queries per scrape): the panel of a running
// sale, and what an alert on a sold-out sale that is owed units reads. Every replica reports the
// same values, so dashboards take max by product.
type stockCollector struct {
	products   ProductLister
	stock      *prometheus.Desc
	initial    *prometheus.Desc
	unreturned *prometheus.Desc
	up         *prometheus.Desc
}

// CollectStock registers the product stock gauges, read from products at every scrape.
func (m *Metrics) CollectStock(products ProductLister) {
	labels := []string{"product_id", "strategy"}
	m.reg.MustRegister(&stockCollector{
		products: products,
		stock:    prometheus.NewDesc("seckill_product_stock", "Units left of each product, read from the database at scrape time.", labels, nil),
		initial:  prometheus.NewDesc("seckill_product_initial_stock", "Units each product's sale started with.", labels, nil),
		unreturned: prometheus.NewDesc("seckill_product_unreturned_units",
			"Units of each product's expired or cancelled orders not back in its stock yet (parked orders aside), read from the database at scrape time.", labels, nil),
		up: prometheus.NewDesc("seckill_product_stock_scrape_ok", "1 if the product stock and unreturned units could be read at this scrape, else 0.", nil, nil),
	})
}

func (c *stockCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.stock
	ch <- c.initial
	ch <- c.unreturned
	ch <- c.up
}

func (c *stockCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ps, err := c.products.Products(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ids := make([]int64, len(ps))
	for i, p := range ps {
		ids[i] = p.ID
	}
	// Without the units owed, the stock is still worth reporting; an alert then sees no
	// unreturned series rather than a wrong 0, and the scrape says it failed.
	owed, err := c.products.UnreturnedUnits(ctx, ids)
	ok := 1.0
	if err != nil {
		ok = 0
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, ok)
	for _, p := range ps {
		id := strconv.FormatInt(p.ID, 10)
		ch <- prometheus.MustNewConstMetric(c.stock, prometheus.GaugeValue, float64(p.Stock), id, string(p.Strategy))
		ch <- prometheus.MustNewConstMetric(c.initial, prometheus.GaugeValue, float64(p.InitialStock), id, string(p.Strategy))
		if err == nil {
			ch <- prometheus.MustNewConstMetric(c.unreturned, prometheus.GaugeValue, float64(owed[p.ID]), id, string(p.Strategy))
		}
	}
}

// CountRedisLuaRefused registers seckill_redislua_refused_orders_total, read from refused at
// every scrape: the redis-lua purchases this process's persister found MySQL cannot hold, each
// now a refused order. The name says what an alert on it means: buyers told 202 whose orders were
// refused.
func (m *Metrics) CountRedisLuaRefused(refused func() int64) {
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "seckill_redislua_refused_orders_total",
		Help: "Accepted (202) redis-lua purchases that this process's persister found MySQL cannot hold, each now an order of status refused (nothing charged): the Redis state went backwards (a failover to a lagging replica). Anything above 0 needs an operator.",
	}, func() float64 { return float64(refused()) }))
}
