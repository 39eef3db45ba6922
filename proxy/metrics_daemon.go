package proxy

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// daemonMetrics are the daemon's own figures, asked over its socket at
// each scrape (the daemon listens on no network: in gateway mode the
// proxy's --metrics is the replica's one address): whether it answers,
// and, joined to a shared tier, the outbox's rows and lag and the
// read-throughs' count, misses, stamps found and time waited.
type daemonMetrics struct {
	p *Proxy

	up, outbox, lag                  *prometheus.Desc
	reads, misses, found, readWaited *prometheus.Desc
}

// daemonScrape bounds the health call a scrape makes.
const daemonScrape = time.Second

func newDaemonMetrics(p *Proxy) *daemonMetrics {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	return &daemonMetrics{p: p,
		up:         d("bindery_daemon_up", "1 when the daemon answered this scrape's health call (within 1 s), else 0."),
		outbox:     d("bindery_shared_outbox_rows", "Facts this machine recorded that wait to be shipped to the shared tier."),
		lag:        d("bindery_shared_outbox_lag_seconds", "How long the oldest fact in the outbox has waited (0: none waits)."),
		reads:      d("bindery_shared_read_throughs_total", "Compiles that asked the shared tier for stamps this machine lacked."),
		misses:     d("bindery_shared_read_through_misses_total", "Read-throughs the shared tier did not answer within --shared-wait (their blocks were stripped)."),
		found:      d("bindery_shared_read_through_stamps_total", "Stamps found by read-throughs."),
		readWaited: d("bindery_shared_read_through_wait_seconds_total", "Time compiles waited on read-throughs."),
	}
}

func (m *daemonMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.up, m.outbox, m.lag, m.reads, m.misses, m.found, m.readWaited} {
		ch <- d
	}
}

func (m *daemonMetrics) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), daemonScrape)
	defer cancel()
	h, err := m.p.client.Health(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(m.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(m.up, prometheus.GaugeValue, 1)
	s := h.Shared
	if s == nil {
		return // a machine alone: no shared series at all
	}
	ch <- prometheus.MustNewConstMetric(m.outbox, prometheus.GaugeValue, float64(s.Outbox))
	ch <- prometheus.MustNewConstMetric(m.lag, prometheus.GaugeValue, float64(s.OutboxLagMs)/1e3)
	ch <- prometheus.MustNewConstMetric(m.reads, prometheus.CounterValue, float64(s.ReadThroughs))
	ch <- prometheus.MustNewConstMetric(m.misses, prometheus.CounterValue, float64(s.ReadThroughMisses))
	ch <- prometheus.MustNewConstMetric(m.found, prometheus.CounterValue, float64(s.ReadThroughFound))
	ch <- prometheus.MustNewConstMetric(m.readWaited, prometheus.CounterValue, float64(s.ReadThroughWaitMs)/1e3)
}
