// Package esdbfake is an in-process EventStoreDB server for tests: it speaks
// the real gRPC protocol (the generated protos of EventStore-Client-Go v4), so
// the official client and Lectern's adapter run against it unchanged, without
// Docker.
//
// It keeps everything in memory. It implements Streams.Append, Streams.Read
// (streams and $all, both directions, catch-up subscriptions with filters,
// checkpoints and caught-up), Streams.Delete and Streams.Tombstone, and
// Gossip.Read (one leader, itself). ServerFeatures and everything else answer
// Unimplemented, as an old server would, so the client uses no optional
// feature (no BatchAppend, no persistent subscriptions).
//
// Where Lectern depends on it, it is as strict as the real server (24.10 and
// 25.0, checked against the KurrentDB source): an append over 1 MiB (data,
// metadata and twice the type's length) is refused with InvalidArgument; a
// position of $all with a prepare past its commit is refused with Unknown; a
// read from inside a record fails with Unknown, a subscription from there is
// confirmed and then dropped with InvalidArgument; a read forwards from past
// the last record is empty, a subscription from there goes live, and a read
// backwards from past the end of the log fails with Unknown; filtered
// subscriptions checkpoint at (C, 0), C the next record's position, once
// more just before caught-up; and a repeated append of revision any is
// recognised only within a window of recent writes (AnyDedupWindow). It can
// be stopped and restarted on its port with its data (Stop, Restart).
package esdbfake

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/protos/gossip"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/serverfeatures"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"lectern/eventstore/esdb"
)

// Server is a running fake EventStoreDB node on a 127.0.0.1 port.
type Server struct {
	addr string
	db   *db

	mu      sync.Mutex
	grpc    *grpc.Server // nil while stopped
	done    chan struct{}
	stopped bool
}

// Start runs a fake server for the test and returns its connection string;
// the server stops when the test ends.
func Start(t testing.TB) string {
	t.Helper()
	s, err := New()
	if err != nil {
		t.Fatalf("esdbfake: %v", err)
	}
	t.Cleanup(s.Close)
	return s.URL()
}

// OpenStore runs a fake server for the test and returns Lectern's
// EventStoreDB store on it; both end when the test ends.
func OpenStore(t testing.TB) *esdb.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := esdb.Open(ctx, Start(t))
	if err != nil {
		t.Fatalf("esdbfake: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// New starts a fake server on a free 127.0.0.1 port.
func New() (*Server, error) {
	lis, err := listenForRestarts()
	if err != nil {
		return nil, fmt.Errorf("esdbfake: listen: %w", err)
	}
	s := &Server{addr: lis.Addr().String(), db: newDB(time.Now)}
	s.serve(lis)
	return s, nil
}

// listenForRestarts listens on a free 127.0.0.1 port below the kernel's
// range of ephemeral ports, so that Restart can listen on it again: a port
// of that range can meanwhile become the local port of any outgoing
// connection on the machine (seen when a loaded test run took a stopped
// fake's port). Where no such port is found, any free port does.
func listenForRestarts() (net.Listener, error) {
	low := 32768 // Linux's default start of the range
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		_, _ = fmt.Sscan(string(b), &low)
	}
	const first = 10000
	for i := 0; i < 50 && low > first; i++ {
		lis, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", first+rand.IntN(low-first)))
		if err == nil {
			return lis, nil
		}
	}
	return net.Listen("tcp", "127.0.0.1:0")
}

// serve starts a gRPC server on lis; the caller holds mu or owns s.
func (s *Server) serve(lis net.Listener) {
	// The client pings every 10 s by default (less when configured), with or
	// without a call in flight; a stricter policy makes the server close the
	// connection with ENHANCE_YOUR_CALM.
	g := grpc.NewServer(grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
		MinTime:             time.Second,
		PermitWithoutStream: true,
	}))
	streams.RegisterStreamsServer(g, &streamsService{db: s.db})
	serverfeatures.RegisterServerFeaturesServer(g, serverfeatures.UnimplementedServerFeaturesServer{})
	port := uint32(lis.Addr().(*net.TCPAddr).Port)
	gossip.RegisterGossipServer(g, &gossipService{port: port})
	done := make(chan struct{})
	s.grpc, s.done = g, done
	go func() {
		defer close(done)
		// Serve returns when the server is stopped.
		_ = g.Serve(lis)
	}()
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.addr }

// URL is the connection string for the client: esdb://127.0.0.1:port?tls=false.
func (s *Server) URL() string { return "esdb://" + s.Addr() + "?tls=false" }

// Stop takes the server down as a crash or an outage would: connections
// drop, subscriptions end, the port refuses connections. What was written
// stays, for Restart.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
}

func (s *Server) stopLocked() {
	if s.grpc == nil {
		return
	}
	s.db.close()
	s.grpc.Stop()
	<-s.done
	s.grpc = nil
}

// Restart serves again, on the same address, what the server held when it
// stopped.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return errors.New("esdbfake: closed")
	}
	if s.grpc != nil {
		return nil
	}
	lis, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("esdbfake: listen again on %s: %w", s.addr, err)
	}
	s.db.reopen()
	s.serve(lis)
	return nil
}

// Close stops the server for good, ending open subscriptions.
func (s *Server) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	s.stopLocked()
}

// record is one event in the log.
type record struct {
	stream   string
	revision uint64
	id       uuid.UUID
	meta     map[string]string // system metadata: type, content-type, created
	custom   []byte
	data     []byte
	pos      uint64 // commit = prepare
	end      uint64 // the next record's position
}

func (r *record) eventType() string { return r.meta["type"] }

// streamState is what the server knows about one stream.
type streamState struct {
	events     []*record // by revision
	truncate   uint64    // soft delete: revisions below are hidden
	deleted    bool      // soft-deleted and not written since
	tombstoned bool
}

// last is the last revision and whether the stream has any event.
func (s *streamState) last() (uint64, bool) {
	if s == nil || len(s.events) == 0 {
		return 0, false
	}
	return uint64(len(s.events) - 1), true
}

// visible are the events a read may return.
func (s *streamState) visible() []*record {
	if s == nil || s.truncate >= uint64(len(s.events)) {
		return nil
	}
	return s.events[s.truncate:]
}

// db is the in-memory store behind the gRPC services.
type db struct {
	mu      sync.Mutex
	log     []*record
	streams map[string]*streamState
	next    uint64        // position of the next record
	changed chan struct{} // closed and replaced on every write
	closed  bool
	now     func() time.Time
}

func newDB(now func() time.Time) *db {
	d := &db{streams: map[string]*streamState{}, next: 128, changed: make(chan struct{}), now: now}
	// A fresh EventStoreDB node already holds a few system events.
	for _, sys := range []struct{ stream, typ, data string }{
		{"$epoch-information", "$epoch-information", `{"epochNumber":0}`},
		{"$scavenges", "$scavengeIndexInitialized", `{}`},
		{"$user-admin", "$User", `{"loginName":"admin"}`},
		{"$settings", "$settings", `{}`},
	} {
		st := d.stream(sys.stream)
		d.write(st, sys.stream, uuid.New(), map[string]string{"type": sys.typ, "content-type": "application/json"}, nil, []byte(sys.data))
	}
	return d
}

func (d *db) stream(name string) *streamState {
	st := d.streams[name]
	if st == nil {
		st = &streamState{}
		d.streams[name] = st
	}
	return st
}

// write appends one record; the caller holds mu and wakes subscribers.
func (d *db) write(st *streamState, stream string, id uuid.UUID, meta map[string]string, custom, data []byte) *record {
	m := make(map[string]string, len(meta)+1)
	for k, v := range meta {
		m[k] = v
	}
	// .NET ticks (100 ns) since the Unix epoch, as the real server writes.
	m["created"] = strconv.FormatInt(d.now().UnixNano()/100, 10)
	r := &record{stream: stream, revision: uint64(len(st.events)), id: id, meta: m, custom: custom, data: data, pos: d.next}
	// Sparse positions, as in the real transaction log: each record advances
	// the position by roughly its size.
	d.next += 64 + uint64(len(stream)+len(custom)+len(data)+len(m["type"]))
	r.end = d.next
	st.events = append(st.events, r)
	st.deleted = false
	d.log = append(d.log, r)
	return r
}

// notify wakes the subscribers; the caller holds mu. Once closed, the
// channel is closed already (close told the subscribers).
func (d *db) notify() {
	if d.closed {
		return
	}
	close(d.changed)
	d.changed = make(chan struct{})
}

func (d *db) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.closed {
		d.closed = true
		close(d.changed)
	}
}

// reopen undoes close, for a restarted server.
func (d *db) reopen() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		d.closed = false
		d.changed = make(chan struct{})
	}
}

// indexAtOrAfter is the index of the first log record at or after pos.
func (d *db) indexAtOrAfter(pos uint64) int {
	return sort.Search(len(d.log), func(i int) bool { return d.log[i].pos >= pos })
}

// indexAfter is the index of the first log record after the position
// (commit, prepare): a record's position is (pos, pos), so the record at
// commit itself comes after (commit, prepare) when prepare < commit.
func (d *db) indexAfter(commit, prepare uint64) int {
	return sort.Search(len(d.log), func(i int) bool {
		p := d.log[i].pos
		return p > commit || (p == commit && prepare < commit)
	})
}

// The server's answers where a position of $all is no use to it. References
// are to github.com/kurrent-io/KurrentDB at v25.0.1 (24.10 is the same).

// errHandler is the answer to a position the server's Position type cannot
// hold (a prepare past the commit, a part past int64 other than all ones):
// its constructor (Transport/Common/Position.cs:47-60) throws while
// Streams.Read builds the request (Grpc/ReadReq.cs:35-36, 43-44), before any
// confirmation, and ASP.NET Core gRPC answers an uncaught exception so.
var errHandler = status.Error(codes.Unknown, "Exception was thrown by handler.")

func positionError(commit, prepare uint64) error {
	tooBig := func(v uint64) bool { return v > math.MaxInt64 && v != math.MaxUint64 }
	if prepare > commit || tooBig(commit) || tooBig(prepare) {
		return errHandler
	}
	return nil
}

// errInvalidPosition ends a subscription whose catch-up read fails at its
// start: a read inside a record (StorageReaderWorker.cs:552-554), thrown as
// ReadResponseException.InvalidPosition (Enumerator.AllSubscription*.cs),
// answered by Streams.Read.cs:334-335 and RpcExceptions.cs:259-260. The
// subscription was confirmed before.
var errInvalidPosition = status.Error(codes.InvalidArgument, "Trying to read from an invalid position.")

// unexpectedResult ends a plain read of $all whose result is neither success
// nor access denied (Enumerator.ReadAll*.cs, the default case;
// RpcExceptions.cs:51-52): InvalidPosition for a read inside a record
// (StorageReaderWorker.cs:472-474), Error for one past the end of the log
// backwards (TFChunkReader.cs:88-93 throws a plain exception).
func unexpectedResult(f *filter, result string) error {
	typ := "ReadAllResult"
	if f != nil {
		typ = "FilteredReadAllResult"
	}
	return status.Errorf(codes.Unknown, "Unexpected %s: %s", typ, result)
}

// lastIndexed is the position of the log's last record, the server's
// LastIndexedPosition (IndexCommitter.cs:43, 324): a read forwards from past
// it is at the end (AllReader.cs:86-88), and a subscription from (L, L) or
// later goes live at once. The caller holds mu.
func (d *db) lastIndexed() uint64 {
	if len(d.log) == 0 {
		return 0
	}
	return d.log[len(d.log)-1].pos
}

// boundary reports whether commit starts a record or ends the log (0 starts
// it: the fake's first record is at 128); any other commit is inside a
// record, where the server cannot read. The caller holds mu.
func (d *db) boundary(commit uint64) bool {
	if commit == 0 || commit == d.next {
		return true
	}
	i := d.indexAtOrAfter(commit)
	return i < len(d.log) && d.log[i].pos == commit
}

type gossipService struct {
	gossip.UnimplementedGossipServer
	port uint32
}
