package projections

import (
	"sync"
	"sync/atomic"
)

// eventMarks holds, by projection, one event marked for handling of its own:
// to pass over (Runner.skipping) or to retry at an operator's request
// (Runner.retrying). Its count lets the check made for every event delivered
// skip the lock while no projection has one.
type eventMarks struct {
	mu     sync.Mutex
	events map[string]string
	n      atomic.Int32
}

// mark marks eventID for projection name, in place of any it had.
func (m *eventMarks) mark(name, eventID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.events == nil {
		m.events = map[string]string{}
	}
	if _, ok := m.events[name]; !ok {
		m.n.Add(1)
	}
	m.events[name] = eventID
}

// unmark forgets projection name's marked event.
func (m *eventMarks) unmark(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.events[name]; ok {
		delete(m.events, name)
		m.n.Add(-1)
	}
}

// is reports whether eventID is projection name's marked event.
func (m *eventMarks) is(name, eventID string) bool {
	if m.n.Load() == 0 {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.events[name] == eventID
}
