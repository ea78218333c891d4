package metrics

import (
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// RegisterPool exports pool's statistics, read on each scrape, labelled
// with its name (main, projections, downstream): connections in use, idle
// and open against the maximum, and how often and how long requests waited
// for one (a pool too small for its load shows as acquire waits growing).
func (m *Metrics) RegisterPool(name string, pool *pgxpool.Pool) {
	labels := prometheus.Labels{"pool": name}
	gauge := func(metric, help string, f func(*pgxpool.Stat) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: namespace, Subsystem: "db_pool", Name: metric, Help: help,
			ConstLabels: labels}, func() float64 { return f(pool.Stat()) })
	}
	counter := func(metric, help string, f func(*pgxpool.Stat) float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: namespace, Subsystem: "db_pool", Name: metric, Help: help,
			ConstLabels: labels}, func() float64 { return f(pool.Stat()) })
	}
	m.registry.MustRegister(
		gauge("acquired_conns", "Connections in use.", func(s *pgxpool.Stat) float64 { return float64(s.AcquiredConns()) }),
		gauge("idle_conns", "Connections open and idle.", func(s *pgxpool.Stat) float64 { return float64(s.IdleConns()) }),
		gauge("total_conns", "Connections open.", func(s *pgxpool.Stat) float64 { return float64(s.TotalConns()) }),
		gauge("max_conns", "The most connections the pool opens.", func(s *pgxpool.Stat) float64 { return float64(s.MaxConns()) }),
		counter("acquires_total", "Connections handed out.", func(s *pgxpool.Stat) float64 { return float64(s.AcquireCount()) }),
		counter("empty_acquires_total", "Acquires that had to wait for a connection.", func(s *pgxpool.Stat) float64 { return float64(s.EmptyAcquireCount()) }),
		counter("acquire_wait_seconds_total", "Time spent acquiring connections.", func(s *pgxpool.Stat) float64 { return s.AcquireDuration().Seconds() }),
		counter("canceled_acquires_total", "Acquires given up (the caller's context ended).", func(s *pgxpool.Stat) float64 { return float64(s.CanceledAcquireCount()) }),
	)
}
