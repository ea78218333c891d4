package commands

import (
	"sync"

	"lectern/aggregates"
)

// TurnObserver follows a practice turn while its models answer (a streamed
// turn: RunSession.Observer, ContinueSession.Observer). Its methods are
// called one at a time, in order: Started once, then Delta and Ended as the
// models answer. They must return quickly: the models' streams wait on them.
//
// The turn itself does not depend on the observer: it is recorded (or not,
// when every model failed) as a turn without one is.
type TurnObserver interface {
	// Started: every check passed and the models are called; sessionID is
	// the session's id (a new session's, once drawn).
	Started(sessionID int64)
	// Delta is the next piece of model's answer.
	Delta(model, text string)
	// Ended: a model answered in full, or failed (a.Error); primary tells
	// whether it is the turn's primary model.
	Ended(a aggregates.ModelAnswer, primary bool)
}

// turnGate serialises an observer's calls and holds the models' pieces back
// until Started, which a new session can only call once its id is drawn
// (the models are called meanwhile).
type turnGate struct {
	mu      sync.Mutex
	obs     TurnObserver
	started bool
	held    []func()
	settled chan struct{} // closed once the gate opened, or never will
}

// startGate returns a gate on obs (nil when obs is nil) that opens with the
// session id sessionID gives, called in the background. If that fails the
// gate never opens; the turn then fails with the same error.
func startGate(obs TurnObserver, sessionID func() (int64, error)) *turnGate {
	if obs == nil {
		return nil
	}
	g := &turnGate{obs: obs, settled: make(chan struct{})}
	go func() {
		defer close(g.settled)
		if id, err := sessionID(); err == nil {
			g.open(id)
		}
	}()
	return g
}

// settle waits until the gate opened (and let through what it held) or
// never will: the turn's outcome must follow its events.
func (g *turnGate) settle() {
	if g != nil {
		<-g.settled
	}
}

func (g *turnGate) open(sessionID int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.obs.Started(sessionID)
	for _, f := range g.held {
		f()
	}
	g.held, g.started = nil, true
}

// do calls f now if the gate is open, else when it opens.
func (g *turnGate) do(f func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.started {
		f()
		return
	}
	g.held = append(g.held, f)
}

func (g *turnGate) delta(model, text string) { g.do(func() { g.obs.Delta(model, text) }) }

func (g *turnGate) ended(a aggregates.ModelAnswer, primary bool) {
	g.do(func() { g.obs.Ended(a, primary) })
}
