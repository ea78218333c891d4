package esdbfake

import (
	"context"
	"testing"
	"time"

	client "github.com/EventStore/EventStore-Client-Go/v4/esdb"

	"lectern/eventstore"
	"lectern/eventstore/esdb"
)

// NewClient is a client of the official library, its logging off, on the
// server at url (a fake's, or a real one's), closed when the test ends: for
// what Lectern's store never does (system events, raw subscriptions).
func NewClient(t testing.TB, url string) *client.Client {
	t.Helper()
	cfg, err := client.ParseConnectionString(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = func(client.LogLevel, string, ...any) {}
	c, err := client.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// LogEnd is the end of the log of the server at url, as a subscription's
// checkpoint can be: (C, 0), C the writer checkpoint, the position after
// the last record. A filtered catch-up subscription checkpoints there just
// before it is caught up (the server's own answer: the checkpoint a
// projection stores when the log ends with system events).
func LogEnd(t testing.TB, url string) eventstore.Position {
	t.Helper()
	c := NewClient(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sub, err := c.SubscribeToAll(ctx, client.SubscribeToAllOptions{From: client.Start{}, Filter: client.ExcludeSystemEventsFilter()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Close() }()
	var end *client.Position
	for {
		e := sub.Recv()
		switch {
		case e.CheckPointReached != nil:
			end = e.CheckPointReached
		case e.CaughtUp != nil:
			if end == nil {
				t.Fatal("esdbfake: caught up without a checkpoint")
			}
			return esdb.PositionOf(*end)
		case e.SubscriptionDropped != nil:
			t.Fatalf("esdbfake: subscription dropped: %v", e.SubscriptionDropped.Error)
		}
	}
}
