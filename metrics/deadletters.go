package metrics

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"lectern/projections"
)

// deadLetterStatuses are every status a dead letter can have (migration
// 00015): each is exported, 0 when none has it, so that an alert on
// status="stopped" sees a series from the first dead letter of a projection.
var deadLetterStatuses = []string{projections.DeadLetterStopped, projections.DeadLetterRetry, projections.DeadLetterSkip,
	projections.DeadLetterSkipped, projections.DeadLetterResolved}

// RegisterDeadLetters exports lectern_projection_dead_letters{projection,
// status}: the rows of projection_dead_letters in db, read on each scrape.
// The table is shared by every process, so the gauge is the cluster's, not
// this process's; stopped, retry and skip are those waiting for an operator
// or for their projection to act on the operator's answer.
func (m *Metrics) RegisterDeadLetters(db Querier) {
	m.registry.MustRegister(&deadLetterCollector{db: db, desc: prometheus.NewDesc(namespace+"_projection_dead_letters",
		"Events projections could not apply (projection_dead_letters), by projection and status: stopped (waiting for an operator), retry and skip (answered, not yet acted on), skipped, resolved.",
		[]string{"projection", "status"}, nil)})
}

type deadLetterCollector struct {
	db   Querier
	desc *prometheus.Desc
}

func (c *deadLetterCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *deadLetterCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), ScrapeTimeout)
	defer cancel()
	counts, err := deadLetterCounts(ctx, c.db)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	for projection, byStatus := range counts {
		for _, status := range deadLetterStatuses {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(byStatus[status]), projection, status)
		}
	}
}

// deadLetterCounts counts the dead letters by projection and status.
func deadLetterCounts(ctx context.Context, db Querier) (map[string]map[string]int64, error) {
	rows, err := db.Query(ctx, `SELECT projection, status, count(*) FROM projection_dead_letters GROUP BY projection, status`)
	if err != nil {
		return nil, fmt.Errorf("metrics: dead letters: %w", err)
	}
	defer rows.Close()
	out := map[string]map[string]int64{}
	for rows.Next() {
		var projection, status string
		var n int64
		if err := rows.Scan(&projection, &status, &n); err != nil {
			return nil, fmt.Errorf("metrics: dead letters: %w", err)
		}
		if out[projection] == nil {
			out[projection] = map[string]int64{}
		}
		out[projection][status] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("metrics: dead letters: %w", err)
	}
	return out, nil
}
