package server

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/refill-dev/refill"
	"github.com/refill-dev/refill/run"
)

// metrics are the server's Prometheus metrics, on a registry of its own.
type metrics struct {
	reg        *prometheus.Registry
	requests   *prometheus.HistogramVec
	runs       *prometheus.CounterVec
	partitions *prometheus.HistogramVec
	gate       *prometheus.CounterVec
}

func newMetrics(s *Server) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "refill_http_request_duration_seconds", Help: "HTTP requests by route pattern, method and status.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"route", "method", "status"}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "refill_runs_total", Help: "Runs started by this server, by how they ended (applied, blocked, not_permitted, failed).",
		}, []string{"outcome"}),
		partitions: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "refill_partition_duration_seconds", Help: "Time to rebuild and publish one partition, by dataset.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 12),
		}, []string{"dataset"}),
		gate: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "refill_gate_failures_total", Help: "Plans the source gate blocked, by when (plan, apply).",
		}, []string{"at"}),
	}
	// Every labelled series exists from the start, at zero, so that a
	// dashboard or an alert on a rate sees it before its first event.
	for _, o := range []string{"applied", "blocked", "not_permitted", "failed"} {
		m.runs.WithLabelValues(o)
	}
	for _, at := range []string{"plan", "apply"} {
		m.gate.WithLabelValues(at)
	}
	if s.Config != nil {
		for _, name := range s.Config.DatasetNames() {
			if d := s.Config.Datasets[name]; d != nil && d.Job != nil {
				m.partitions.WithLabelValues(name)
			}
		}
	}
	for _, r := range apiSuccesses() {
		m.requests.WithLabelValues(r.route, r.method, r.status)
	}
	m.reg.MustRegister(m.requests, m.runs, m.partitions, m.gate,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&planCollector{s: s, desc: prometheus.NewDesc("refill_plans", "Stored plans by tier and status.", []string{"tier", "status"}, nil)})
	return m
}

// watch times the partitions runner publishes, and counts the runs the
// source gate stopped as they began.
func (m *metrics) watch(r *run.Runner) {
	if r == nil {
		return
	}
	prevBlocked := r.OnBlocked
	r.OnBlocked = func(planID string) {
		m.runs.WithLabelValues("blocked").Inc()
		m.gate.WithLabelValues("apply").Inc()
		if prevBlocked != nil {
			prevBlocked(planID)
		}
	}
	prev := r.OnPublished
	r.OnPublished = func(dataset, partition string, rows *int64, took time.Duration) {
		m.partitions.WithLabelValues(dataset).Observe(took.Seconds())
		if prev != nil {
			prev(dataset, partition, rows, took)
		}
	}
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// run counts the outcome of a run this server started (one the gate
// stopped as it began is counted by watch).
func (m *metrics) run(err error) {
	outcome := "applied"
	switch refill.ExitCode(err) {
	case refill.ExitOK:
	case refill.ExitNotPermitted:
		outcome = "not_permitted"
	default:
		outcome = "failed"
	}
	m.runs.WithLabelValues(outcome).Inc()
}

// instrument times every request by its route pattern (never the raw
// path, which holds plan IDs).
func (m *metrics) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		route := r.Pattern
		if route == "" {
			route = "unmatched"
		}
		m.requests.WithLabelValues(route, r.Method, strconv.Itoa(rec.status)).Observe(time.Since(start).Seconds())
	})
}

// planCollector counts plans by tier and status from the state store at
// each scrape, so every replica reports the same truth.
type planCollector struct {
	s    *Server
	desc *prometheus.Desc
}

func (c *planCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *planCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	counts, err := c.s.Store.PlanCounts(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	n := map[[2]string]int{}
	for _, pc := range counts {
		n[[2]string{string(pc.Tier), string(pc.Status)}] += pc.Plans
	}
	// Every tier and status, at zero when no plan is so.
	for _, tier := range []refill.Tier{refill.TierAuto, refill.TierSemiAuto, refill.TierManual} {
		for _, st := range refill.Statuses {
			n[[2]string{string(tier), string(st)}] += 0
		}
	}
	for k, v := range n {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(v), k[0], k[1])
	}
}
