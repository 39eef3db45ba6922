package proxy

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// The proxy's metrics, in Prometheus' text format (issue 29's gateway
// mode: a team that runs several proxies behind a balancer watches them
// this way; `bindery proxy --metrics ADDR`, loopback only). Every series
// is counted whether or not it is served: a counter is an atomic add. No
// label carries anything a client sent (no model id, no session, no
// header), so a series' count is bounded and nothing a client sends
// reaches the scrape.
type metrics struct {
	reg *prometheus.Registry

	requests  *prometheus.CounterVec   // route, code
	ttfb      *prometheus.HistogramVec // route
	compile   prometheus.Histogram
	failOpen  *prometheus.CounterVec // why
	stripped  prometheus.Counter
	kept      prometheus.Counter
	retries   *prometheus.CounterVec // outcome
	accepts   *prometheus.CounterVec // outcome
	inFlight  prometheus.Gauge
	overloads prometheus.Counter
	ahead     *prometheus.CounterVec // outcome
	compiles  *prometheus.CounterVec // by
}

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	// Time to first byte: up to 10 min (the upstream's own timeout); most
	// answers begin within seconds.
	ttfbBuckets := []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 600}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bindery_proxy_requests_total",
		Help: "Requests answered, by route (messages, count_tokens, other) and HTTP status."}, []string{"route", "code"})
	m.ttfb = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "bindery_proxy_time_to_first_byte_seconds",
		Help: "From the request's arrival to its answer's status line, by route.", Buckets: ttfbBuckets}, []string{"route"})
	m.compile = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "bindery_proxy_compile_seconds",
		Help: "The daemon's compile call, as the proxy waited for it.", Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2}})
	m.failOpen = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bindery_proxy_fail_open_total",
		Help: "Requests sent upstream as the client sent them, by why (daemon_down, daemon_refused, plan_mismatch)."}, []string{"why"})
	m.stripped = prometheus.NewCounter(prometheus.CounterOpts{Name: "bindery_proxy_thinking_stripped_total",
		Help: "Thinking blocks the daemon's plans stripped."})
	m.kept = prometheus.NewCounter(prometheus.CounterOpts{Name: "bindery_proxy_thinking_kept_total",
		Help: "Thinking blocks sent on as the client sent them."})
	m.retries = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bindery_proxy_retries_total",
		Help: "Binding refusals released and retried inside the proxy, by outcome (answered, refused_again, failed, strict: the client asked for the 400)."}, []string{"outcome"})
	m.accepts = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bindery_proxy_accepts_total",
		Help: "Replies accepted (ok), or not (failed: the daemon's call failed; unread: the reply could not be read)."}, []string{"outcome"})
	m.inFlight = prometheus.NewGauge(prometheus.GaugeOpts{Name: "bindery_proxy_requests_in_flight",
		Help: "Messages requests in flight (bounded by --max-streams)."})
	m.overloads = prometheus.NewCounter(prometheus.CounterOpts{Name: "bindery_proxy_overloaded_total",
		Help: "Requests answered 529 because --max-streams were in flight."})
	m.ahead = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bindery_proxy_sent_ahead_total",
		Help: "Requests whose body was sent upstream ahead of its compile (speculate.go), by outcome (completed; abandoned short of its length and sent again whole)."}, []string{"outcome"})
	m.compiles = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bindery_proxy_compiles_total",
		Help: "Compiles answered, by how the request was given (reference: the messages after those its history's last request shares; full: no base held; refused: by reference, refused by the daemon (it holds no such base, or other bytes), then in full)."}, []string{"by"})
	m.reg.MustRegister(m.requests, m.ttfb, m.compile, m.failOpen, m.stripped, m.kept, m.retries, m.accepts, m.inFlight, m.overloads, m.ahead, m.compiles)
	return m
}

// Metrics is the handler of the proxy's metrics (GET /metrics), in
// Prometheus' text format.
func (p *Proxy) Metrics() http.Handler {
	return promhttp.HandlerFor(p.metrics.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// timedWriter notes the answer's status and when it began.
type timedWriter struct {
	http.ResponseWriter
	m     *metrics
	route string
	start time.Time
	code  int
}

func (t *timedWriter) WriteHeader(code int) {
	if t.code == 0 {
		t.code = code
		t.m.ttfb.WithLabelValues(t.route).Observe(time.Since(t.start).Seconds())
	}
	t.ResponseWriter.WriteHeader(code)
}

func (t *timedWriter) Write(b []byte) (int, error) {
	if t.code == 0 {
		t.WriteHeader(http.StatusOK)
	}
	return t.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (Flush).
func (t *timedWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }

// done counts the request once it is answered (a client that left before
// any answer counts as 499, as nginx names it).
func (t *timedWriter) done() {
	code := t.code
	if code == 0 {
		code = 499
	}
	t.m.requests.WithLabelValues(t.route, strconv.Itoa(code)).Inc()
}
