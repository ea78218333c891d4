package downstream_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wmnats "github.com/ThreeDotsLabs/watermill-nats/v2/pkg/nats"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"

	"lectern/pgtest"
	"lectern/poll"
	"lectern/service"
	"lectern/testlog"
)

// natsAddr is where these machines run a NATS server with JetStream.
const natsAddr = "127.0.0.1:4222"

// jetStream connects to the local NATS server or skips the test.
func jetStream(t *testing.T) nats.JetStreamContext {
	t.Helper()
	nc, err := nats.Connect("nats://"+natsAddr, nats.Timeout(time.Second))
	if err != nil {
		t.Skipf("no NATS server on %s (run `nats-server -js` there for the JetStream tests): %v", natsAddr, err)
	}
	t.Cleanup(nc.Close)
	js, err := nc.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.AccountInfo(); err != nil {
		t.Skipf("the NATS server on %s has no JetStream (run it with -js): %v", natsAddr, err)
	}
	return js
}

// natsTopic is a stream of this test's own, deleted when it ends: the
// server outlives the test run.
func natsTopic(t *testing.T, js nats.JetStreamContext) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	topic := "lectern_test_" + hex.EncodeToString(b)
	t.Cleanup(func() { _ = js.DeleteStream(topic) })
	return topic
}

// natsSubscriber is what docs/subscribing.md shows: a watermill-nats
// JetStream subscriber with a durable consumer reading from the start.
func natsSubscriber(t *testing.T, topic string) <-chan *message.Message {
	t.Helper()
	sub, err := wmnats.NewSubscriber(wmnats.SubscriberConfig{
		URL:         "nats://" + natsAddr,
		Unmarshaler: &wmnats.NATSMarshaler{},
		JetStream: wmnats.JetStreamConfig{
			DurablePrefix:    "test",
			SubscribeOptions: []nats.SubOpt{nats.DeliverAll(), nats.AckExplicit()},
		},
	}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); _ = sub.Close() })
	ch, err := sub.Subscribe(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// caughtUp waits until the forwarder's checkpoint is at the log's end.
func caughtUp(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	poll.Must(t, 15*time.Second, "the forwarder's checkpoint reaches the end of the log", func() bool {
		var ok bool
		err := pool.QueryRow(context.Background(), `
			SELECT EXISTS (SELECT 1 FROM projection_offsets o,
				(SELECT transaction_id, "offset" FROM events ORDER BY transaction_id DESC, "offset" DESC LIMIT 1) e
				WHERE o.consumer_group = 'downstream'
				  AND o.last_processed_transaction_id = e.transaction_id AND o.offset_acked = e."offset")`).Scan(&ok)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	})
}

// With LECTERN_BROKER_URL=nats://..., the same CloudEvents arrive on a
// JetStream stream, in order; a forwarder that lost its checkpoint publishes
// them again and JetStream drops the repeats (Nats-Msg-Id is the event id).
func TestNATSJetStream(t *testing.T) {
	js := jetStream(t)
	topic := natsTopic(t, js)
	pool := pgtest.Fresh(t)
	cfg := service.Config{BrokerURL: "nats://" + natsAddr, BrokerTopic: topic, BrokerRetention: 3 * time.Hour}
	h := start(t, pool, cfg)
	class := h.classroom()
	want := published(t, pool)
	caughtUp(t, pool) // the forwarder provisions the stream on its first publish
	sub := natsSubscriber(t, topic)
	check(t, want, receive(t, sub, len(want), 15*time.Second))
	created, err := js.StreamInfo(topic)
	if err != nil {
		t.Fatal(err)
	}
	if created.Config.MaxAge != 3*time.Hour {
		t.Fatalf("the stream Lectern created keeps messages for %v, want the retention, 3h", created.Config.MaxAge)
	}

	h.stop()
	if _, err := pool.Exec(context.Background(), `DELETE FROM projection_offsets WHERE consumer_group = 'downstream'`); err != nil {
		t.Fatal(err)
	}
	h = start(t, pool, cfg)
	caughtUp(t, pool)
	info, err := js.StreamInfo(topic)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != uint64(len(want)) {
		t.Fatalf("after a republish the stream holds %d messages, want %d (deduplicated by Nats-Msg-Id)", info.State.Msgs, len(want))
	}
	nothingMore(t, h, class, sub) // nor did the subscriber get a repeat
}

// flakyProxy forwards TCP connections to NATS while up and drops them at
// once while down: a broker outage the test can end.
type flakyProxy struct {
	ln    net.Listener
	up    atomic.Bool
	mu    sync.Mutex
	conns []net.Conn
}

func newFlakyProxy(t *testing.T, target string) *flakyProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &flakyProxy{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if !p.up.Load() {
				_ = c.Close()
				continue
			}
			d, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, d)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(d, c); _ = d.Close() }()
			go func() { _, _ = io.Copy(c, d); _ = c.Close() }()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			_ = c.Close()
		}
	})
	return p
}

// While the broker is away the service keeps serving (writes read their
// own writes, /readyz stays 200) and the forwarder reports the failure;
// once it is back, every change is published, in order, none lost.
func TestBrokerOutage(t *testing.T) {
	js := jetStream(t)
	topic := natsTopic(t, js)
	proxy := newFlakyProxy(t, natsAddr)
	pool := pgtest.Fresh(t)
	var logs testlog.Buffer
	h := start(t, pool, service.Config{BrokerURL: "nats://" + proxy.ln.Addr().String(), BrokerTopic: topic,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})

	h.strict = true
	class := h.classroom()
	want := published(t, pool)
	poll.Must(t, 10*time.Second, "the forwarder reports the broker outage", func() bool {
		return h.svc.Downstream.Status().Stalled
	})
	if st := h.svc.Downstream.Status(); st.Error == "" {
		t.Fatalf("status %+v: no error", st)
	}
	res, err := http.Get(h.url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("/readyz during a broker outage: %d, want 200", res.StatusCode)
	}

	proxy.up.Store(true)
	caughtUp(t, pool)
	sub := natsSubscriber(t, topic)
	check(t, want, receive(t, sub, len(want), 15*time.Second))
	nothingMore(t, h, class, sub)
	if st := h.svc.Downstream.Status(); st.Stalled {
		t.Fatalf("status after the outage: %+v", st)
	}
	// An outage is logged as one, not as a poison event.
	if out := logs.String(); strings.Contains(out, "poison") || !strings.Contains(out, "level=WARN msg=\"downstream forwarder stopped") {
		t.Errorf("the outage's log:\n%s", out)
	}
}
