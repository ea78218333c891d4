package metrics

import "lectern/llm"

// ObserveModelResult records one llm.Result: its model's logical name, its
// outcome (OutcomeOK, or the error kind) and its latency.
func (m *Metrics) ObserveModelResult(res llm.Result) {
	outcome := OutcomeOK
	if res.Err != nil {
		outcome = res.Err.Kind
	}
	m.ObserveModelCall(res.Model.Name, outcome, res.Latency)
}

// ObserveModelResults records each of results (as llm.Gateway.CompleteAll returns them).
func (m *Metrics) ObserveModelResults(results []llm.Result) {
	for _, r := range results {
		m.ObserveModelResult(r)
	}
}
