package esdbfake

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/EventStore/EventStore-Client-Go/v4/protos/gossip"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/shared"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// deletedStream is the revision of a tombstone (EventNumber.DeletedStream).
const deletedStream = math.MaxInt64

func (g *gossipService) Read(context.Context, *shared.Empty) (*gossip.ClusterInfo, error) {
	return &gossip.ClusterInfo{Members: []*gossip.MemberInfo{{
		InstanceId:   protoUUID(uuid.New(), true),
		State:        gossip.MemberInfo_Leader,
		IsAlive:      true,
		HttpEndPoint: &gossip.EndPoint{Address: "127.0.0.1", Port: g.port},
	}}}, nil
}

type streamsService struct {
	streams.UnimplementedStreamsServer
	db *db
}

// expectation is an expected stream revision of an append, delete or tombstone.
type expectation struct {
	kind int // expectAny, expectNoStream, expectExists, expectRevision
	rev  uint64
}

const (
	expectAny = iota
	expectNoStream
	expectExists
	expectRevision
)

func (e expectation) String() string {
	switch e.kind {
	case expectNoStream:
		return "-1"
	case expectExists:
		return "-4"
	case expectRevision:
		return strconv.FormatUint(e.rev, 10)
	}
	return "-2"
}

// MaxAppendSize is the server's default maximum append size (24.10, 25.0).
const MaxAppendSize = 1 << 20

// proposed is an event as the client proposes it.
type proposed struct {
	id     uuid.UUID
	meta   map[string]string
	custom []byte
	data   []byte
}

func (s *streamsService) Append(srv streams.Streams_AppendServer) error {
	first, err := srv.Recv()
	if err != nil {
		return err
	}
	opts := first.GetOptions()
	if opts == nil {
		return status.Error(codes.InvalidArgument, "the first append message must carry options")
	}
	name := string(opts.GetStreamIdentifier().GetStreamName())
	if name == "" {
		return status.Error(codes.InvalidArgument, "stream name is required")
	}
	var exp expectation
	switch v := opts.GetExpectedStreamRevision().(type) {
	case *streams.AppendReq_Options_Revision:
		exp = expectation{kind: expectRevision, rev: v.Revision}
	case *streams.AppendReq_Options_NoStream:
		exp = expectation{kind: expectNoStream}
	case *streams.AppendReq_Options_StreamExists:
		exp = expectation{kind: expectExists}
	}
	var events []proposed
	size := 0
	for {
		req, err := srv.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		pm := req.GetProposedMessage()
		if pm == nil {
			return status.Error(codes.InvalidArgument, "expected a proposed message")
		}
		id, err := fromProtoUUID(pm.GetId())
		if err != nil {
			return status.Error(codes.InvalidArgument, err.Error())
		}
		// The real server refuses events without these two keys.
		for _, k := range []string{"type", "content-type"} {
			if _, ok := pm.GetMetadata()[k]; !ok {
				return status.Errorf(codes.InvalidArgument, "required metadata property %q is missing", k)
			}
		}
		// As the server counts an append against its maximum append size
		// (1 MiB by default): data, metadata and twice the type's length.
		size += len(pm.GetData()) + len(pm.GetCustomMetadata()) + 2*len(pm.GetMetadata()["type"])
		if size > MaxAppendSize {
			return status.Errorf(codes.InvalidArgument, "Maximum Append Size of %d Exceeded.", MaxAppendSize)
		}
		events = append(events, proposed{id: id, meta: pm.GetMetadata(), custom: pm.GetCustomMetadata(), data: pm.GetData()})
	}
	resp, err := s.db.append(name, exp, events)
	if err != nil {
		if name, ok := isDeleted(err); ok {
			return streamDeletedError(srv.Context(), name)
		}
		return err
	}
	return srv.SendAndClose(resp)
}

type deletedError string

func (e deletedError) Error() string { return fmt.Sprintf("event stream %q is deleted", string(e)) }

func isDeleted(err error) (string, bool) {
	var d deletedError
	if errors.As(err, &d) {
		return string(d), true
	}
	return "", false
}

// streamDeletedError is how the server reports a tombstoned stream: the
// client reads the trailers, not the status code.
func streamDeletedError(ctx context.Context, name string) error {
	_ = grpc.SetTrailer(ctx, metadata.Pairs("exception", "stream-deleted", "stream-name", name))
	return status.Errorf(codes.FailedPrecondition, "Event stream '%s' is deleted.", name)
}

// exists reports whether the stream counts as existing for expected-version
// checks, and its last revision.
func (st *streamState) current() (uint64, bool) {
	last, ok := st.last()
	if !ok || st.deleted {
		return 0, false
	}
	return last, true
}

// matches reports whether the stream holds events exactly at revisions from,
// from+1, ...: an append already done.
func (st *streamState) matches(from uint64, events []proposed) bool {
	if st == nil || from+uint64(len(events)) > uint64(len(st.events)) {
		return false
	}
	for i, e := range events {
		if st.events[from+uint64(i)].id != e.id {
			return false
		}
	}
	return true
}

// indexOf is the revision of the event with id, if the stream holds it.
func (st *streamState) indexOf(id uuid.UUID) (uint64, bool) {
	if st == nil {
		return 0, false
	}
	for i, e := range st.events {
		if e.id == id {
			return uint64(i), true
		}
	}
	return 0, false
}

// AnyDedupWindow is how many of the log's latest records an append of
// revision any is checked against for a repeat (the server's cache of recent
// writes, whose size is its configuration's).
const AnyDedupWindow = 1000

// recent reports whether r is among the last AnyDedupWindow records; the
// caller holds mu.
func (d *db) recent(r *record) bool {
	return len(d.log) <= AnyDedupWindow || r.pos >= d.log[len(d.log)-AnyDedupWindow].pos
}

func (d *db) append(name string, exp expectation, events []proposed) (*streams.AppendResp, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		// Stopped while this append was on its way, as a real server's
		// in-flight writes fail when it goes down.
		return nil, status.Error(codes.Unavailable, "server is shutting down")
	}
	st := d.streams[name]
	if st != nil && st.tombstoned {
		return nil, deletedError(name)
	}
	cur, exists := st.current()

	idempotent := func(from uint64) *streams.AppendResp {
		// The real server answers a repeated write with the revision of its
		// last event and no position.
		return &streams.AppendResp{Result: &streams.AppendResp_Success_{Success: &streams.AppendResp_Success{
			CurrentRevisionOption: &streams.AppendResp_Success_CurrentRevision{CurrentRevision: from + uint64(len(events)) - 1},
			PositionOption:        &streams.AppendResp_Success_NoPosition{NoPosition: &shared.Empty{}},
		}}}
	}
	ok := true
	switch exp.kind {
	case expectAny, expectExists:
		if exp.kind == expectExists && !exists {
			ok = false
			break
		}
		// The server recognises a repeated write of revision any only
		// while its events are in its cache of recent writes: past it, the
		// same events are written again.
		if len(events) == 0 {
			break
		}
		if at, found := st.indexOf(events[0].id); found && d.recent(st.events[at]) {
			if st.matches(at, events) {
				return idempotent(at), nil
			}
			ok = false // part of the batch is written: corrupted idempotency
		}
	case expectNoStream, expectRevision:
		next := uint64(0)
		if exp.kind == expectRevision {
			next = exp.rev + 1
		}
		switch {
		case exp.kind == expectNoStream && !exists, exists && exp.kind == expectRevision && exp.rev == cur:
		case len(events) > 0 && st.matches(next, events) && !(exp.kind == expectNoStream && st.deleted):
			return idempotent(next), nil
		default:
			ok = false
		}
	}
	if !ok {
		return wrongExpectedVersion(exp, cur, exists), nil
	}
	if len(events) == 0 {
		success := &streams.AppendResp_Success{PositionOption: &streams.AppendResp_Success_NoPosition{NoPosition: &shared.Empty{}}}
		if exists {
			success.CurrentRevisionOption = &streams.AppendResp_Success_CurrentRevision{CurrentRevision: cur}
		} else {
			success.CurrentRevisionOption = &streams.AppendResp_Success_NoStream{NoStream: &shared.Empty{}}
		}
		return &streams.AppendResp{Result: &streams.AppendResp_Success_{Success: success}}, nil
	}
	st = d.stream(name)
	var last *record
	for _, e := range events {
		last = d.write(st, name, e.id, e.meta, e.custom, e.data)
	}
	d.notify()
	return &streams.AppendResp{Result: &streams.AppendResp_Success_{Success: &streams.AppendResp_Success{
		CurrentRevisionOption: &streams.AppendResp_Success_CurrentRevision{CurrentRevision: last.revision},
		PositionOption: &streams.AppendResp_Success_Position{Position: &streams.AppendResp_Position{
			CommitPosition: last.pos, PreparePosition: last.pos,
		}},
	}}}, nil
}

func wrongExpectedVersion(exp expectation, cur uint64, exists bool) *streams.AppendResp {
	w := &streams.AppendResp_WrongExpectedVersion{}
	if exists {
		w.CurrentRevisionOption = &streams.AppendResp_WrongExpectedVersion_CurrentRevision{CurrentRevision: cur}
		w.CurrentRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_CurrentRevision_20_6_0{CurrentRevision_20_6_0: cur}
	} else {
		w.CurrentRevisionOption = &streams.AppendResp_WrongExpectedVersion_CurrentNoStream{CurrentNoStream: &shared.Empty{}}
		w.CurrentRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_NoStream_20_6_0{NoStream_20_6_0: &shared.Empty{}}
	}
	switch exp.kind {
	case expectRevision:
		w.ExpectedRevisionOption = &streams.AppendResp_WrongExpectedVersion_ExpectedRevision{ExpectedRevision: exp.rev}
		w.ExpectedRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_ExpectedRevision_20_6_0{ExpectedRevision_20_6_0: exp.rev}
	case expectNoStream:
		w.ExpectedRevisionOption = &streams.AppendResp_WrongExpectedVersion_ExpectedNoStream{ExpectedNoStream: &shared.Empty{}}
	case expectExists:
		w.ExpectedRevisionOption = &streams.AppendResp_WrongExpectedVersion_ExpectedStreamExists{ExpectedStreamExists: &shared.Empty{}}
		w.ExpectedRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_StreamExists_20_6_0{StreamExists_20_6_0: &shared.Empty{}}
	default:
		w.ExpectedRevisionOption = &streams.AppendResp_WrongExpectedVersion_ExpectedAny{ExpectedAny: &shared.Empty{}}
		w.ExpectedRevisionOption_20_6_0 = &streams.AppendResp_WrongExpectedVersion_Any_20_6_0{Any_20_6_0: &shared.Empty{}}
	}
	return &streams.AppendResp{Result: &streams.AppendResp_WrongExpectedVersion_{WrongExpectedVersion: w}}
}

// checkExpected is the expected-version check of Delete and Tombstone, which
// report a conflict as a gRPC error rather than a result.
func checkExpected(ctx context.Context, exp expectation, st *streamState) error {
	cur, exists := st.current()
	ok := true
	switch exp.kind {
	case expectNoStream:
		ok = !exists
	case expectExists:
		ok = exists
	case expectRevision:
		ok = exists && cur == exp.rev
	}
	if ok {
		return nil
	}
	actual := "-1"
	if exists {
		actual = strconv.FormatUint(cur, 10)
	}
	_ = grpc.SetTrailer(ctx, metadata.Pairs("exception", "wrong-expected-version", "actual-version", actual, "expected-version", exp.String()))
	return status.Errorf(codes.FailedPrecondition, "Append failed due to WrongExpectedVersion. Expected version: %s, Actual version: %s", exp, actual)
}

func deleteExpectation(v any) expectation {
	switch v := v.(type) {
	case *streams.DeleteReq_Options_Revision:
		return expectation{kind: expectRevision, rev: v.Revision}
	case *streams.DeleteReq_Options_NoStream:
		return expectation{kind: expectNoStream}
	case *streams.DeleteReq_Options_StreamExists:
		return expectation{kind: expectExists}
	case *streams.TombstoneReq_Options_Revision:
		return expectation{kind: expectRevision, rev: v.Revision}
	case *streams.TombstoneReq_Options_NoStream:
		return expectation{kind: expectNoStream}
	case *streams.TombstoneReq_Options_StreamExists:
		return expectation{kind: expectExists}
	}
	return expectation{kind: expectAny}
}

// Delete soft-deletes a stream: it writes the stream's metadata with a
// truncate-before past its last event, so reads find no stream, and a later
// append continues the revisions where they left off.
func (s *streamsService) Delete(ctx context.Context, req *streams.DeleteReq) (*streams.DeleteResp, error) {
	name := string(req.GetOptions().GetStreamIdentifier().GetStreamName())
	d := s.db
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.streams[name]
	if st != nil && st.tombstoned {
		return nil, streamDeletedError(ctx, name)
	}
	if err := checkExpected(ctx, deleteExpectation(req.GetOptions().GetExpectedStreamRevision()), st); err != nil {
		return nil, err
	}
	st = d.stream(name)
	st.truncate = uint64(len(st.events))
	st.deleted = true
	metaName := "$$" + name
	r := d.write(d.stream(metaName), metaName, uuid.New(),
		map[string]string{"type": "$metadata", "content-type": "application/json"}, nil,
		fmt.Appendf(nil, `{"$tb":%d}`, st.truncate))
	d.notify()
	return &streams.DeleteResp{PositionOption: &streams.DeleteResp_Position_{Position: &streams.DeleteResp_Position{
		CommitPosition: r.pos, PreparePosition: r.pos,
	}}}, nil
}

// Tombstone deletes a stream for good: it writes a $streamDeleted event, and
// the stream can never be read or written again.
func (s *streamsService) Tombstone(ctx context.Context, req *streams.TombstoneReq) (*streams.TombstoneResp, error) {
	name := string(req.GetOptions().GetStreamIdentifier().GetStreamName())
	d := s.db
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.streams[name]
	if st != nil && st.tombstoned {
		return nil, streamDeletedError(ctx, name)
	}
	if err := checkExpected(ctx, deleteExpectation(req.GetOptions().GetExpectedStreamRevision()), st); err != nil {
		return nil, err
	}
	st = d.stream(name)
	// The tombstone is in $all, not in the stream's revisions.
	r := &record{stream: name, revision: deletedStream, id: uuid.New(), pos: d.next,
		meta: map[string]string{"type": "$streamDeleted", "content-type": "application/octet-stream",
			"created": strconv.FormatInt(d.now().UnixNano()/100, 10)}}
	d.next += 64 + uint64(len(name))
	d.log = append(d.log, r)
	st.tombstoned = true
	d.notify()
	return &streams.TombstoneResp{PositionOption: &streams.TombstoneResp_Position_{Position: &streams.TombstoneResp_Position{
		CommitPosition: r.pos, PreparePosition: r.pos,
	}}}, nil
}

// filter is a server-side subscription (or read) filter.
type filter struct {
	onType   bool
	re       *regexp.Regexp
	prefixes []string
	interval int // checkpoint every interval events searched
}

func newFilter(o *streams.ReadReq_Options_FilterOptions) (*filter, error) {
	if o == nil {
		return nil, nil
	}
	f := &filter{}
	var expr *streams.ReadReq_Options_FilterOptions_Expression
	if e := o.GetEventType(); e != nil {
		f.onType, expr = true, e
	} else {
		expr = o.GetStreamIdentifier()
	}
	if expr.GetRegex() != "" {
		re, err := regexp.Compile(expr.GetRegex())
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "filter regex: %v", err)
		}
		f.re = re
	}
	f.prefixes = expr.GetPrefix()
	window := int(o.GetMax())
	if o.GetCount() != nil || window == 0 {
		window = 32
	}
	f.interval = window * max(1, int(o.GetCheckpointIntervalMultiplier()))
	return f, nil
}

func (f *filter) match(r *record) bool {
	if f == nil {
		return true
	}
	s := r.stream
	if f.onType {
		s = r.eventType()
	}
	if f.re != nil {
		return f.re.MatchString(s)
	}
	for _, p := range f.prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return len(f.prefixes) == 0
}

// Read serves plain reads (a bounded count: only events, or stream-not-found)
// and catch-up subscriptions (confirmation, events, checkpoints, caught-up).
func (s *streamsService) Read(req *streams.ReadReq, srv streams.Streams_ReadServer) error {
	o := req.GetOptions()
	f, err := newFilter(o.GetFilter())
	if err != nil {
		return err
	}
	structured := o.GetUuidOption().GetString_() == nil
	if o.GetSubscription() != nil {
		if o.GetReadDirection() != streams.ReadReq_Options_Forwards {
			return status.Error(codes.InvalidArgument, "subscriptions read forwards")
		}
		return s.subscribe(o, f, structured, srv)
	}
	count := o.GetCount()
	var out []*record
	if so := o.GetStream(); so != nil {
		name := string(so.GetStreamIdentifier().GetStreamName())
		var found, deleted bool
		out, found, deleted = s.db.readStream(so, o.GetReadDirection() == streams.ReadReq_Options_Backwards, count)
		if deleted {
			return streamDeletedError(srv.Context(), name)
		}
		if !found {
			return srv.Send(&streams.ReadResp{Content: &streams.ReadResp_StreamNotFound_{StreamNotFound: &streams.ReadResp_StreamNotFound{
				StreamIdentifier: &shared.StreamIdentifier{StreamName: []byte(name)},
			}}})
		}
		for _, r := range out {
			if err := srv.Send(eventResp(r, false, structured)); err != nil {
				return err
			}
		}
		return nil
	}
	out, err = s.db.readAll(o.GetAll(), o.GetReadDirection() == streams.ReadReq_Options_Backwards, count, f)
	if err != nil {
		return err
	}
	for _, r := range out {
		if err := srv.Send(eventResp(r, true, structured)); err != nil {
			return err
		}
	}
	return nil
}

// readStream returns up to count events of a stream, whether the stream
// exists, and whether it is tombstoned.
func (d *db) readStream(o *streams.ReadReq_Options_StreamOptions, backwards bool, count uint64) (out []*record, found, deleted bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.streams[string(o.GetStreamIdentifier().GetStreamName())]
	if st != nil && st.tombstoned {
		return nil, false, true
	}
	vis := st.visible()
	if len(vis) == 0 {
		return nil, false, false
	}
	first := vis[0].revision
	last := vis[len(vis)-1].revision
	if !backwards {
		from := first
		switch v := o.GetRevisionOption().(type) {
		case *streams.ReadReq_Options_StreamOptions_End:
			from = last + 1
		case *streams.ReadReq_Options_StreamOptions_Revision:
			from = max(v.Revision, first)
		}
		for rev := from; rev <= last && uint64(len(out)) < count; rev++ {
			out = append(out, st.events[rev])
		}
		return out, true, false
	}
	from := last
	switch v := o.GetRevisionOption().(type) {
	case *streams.ReadReq_Options_StreamOptions_Start:
		from = first
	case *streams.ReadReq_Options_StreamOptions_Revision:
		if v.Revision < first {
			return nil, true, false
		}
		from = min(v.Revision, last)
	}
	for rev := int64(from); rev >= int64(first) && uint64(len(out)) < count; rev-- {
		out = append(out, st.events[rev])
	}
	return out, true, false
}

// readAll returns up to count events of $all: forwards from a position
// inclusive, backwards from a position exclusive.
func (d *db) readAll(o *streams.ReadReq_Options_AllOptions, backwards bool, count uint64, f *filter) ([]*record, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if p := o.GetPosition(); p != nil {
		c := p.GetCommitPosition()
		if err := positionError(c, p.GetPreparePosition()); err != nil {
			return nil, err
		}
		switch {
		case !backwards && c > d.lastIndexed():
			return nil, nil // the end: nothing to read, no error
		case backwards && c > d.next:
			return nil, unexpectedResult(f, "Error")
		case !d.boundary(c):
			return nil, unexpectedResult(f, "InvalidPosition")
		}
	}
	var out []*record
	if !backwards {
		i := 0
		switch v := o.GetAllOption().(type) {
		case *streams.ReadReq_Options_AllOptions_End:
			i = len(d.log)
		case *streams.ReadReq_Options_AllOptions_Position:
			i = d.indexAtOrAfter(v.Position.GetCommitPosition())
		}
		for ; i < len(d.log) && uint64(len(out)) < count; i++ {
			if f.match(d.log[i]) {
				out = append(out, d.log[i])
			}
		}
		return out, nil
	}
	i := len(d.log) - 1
	switch v := o.GetAllOption().(type) {
	case *streams.ReadReq_Options_AllOptions_Start:
		i = -1
	case *streams.ReadReq_Options_AllOptions_Position:
		i = d.indexAtOrAfter(v.Position.GetCommitPosition()) - 1
	}
	for ; i >= 0 && uint64(len(out)) < count; i-- {
		if f.match(d.log[i]) {
			out = append(out, d.log[i])
		}
	}
	return out, nil
}

// subscribe serves a catch-up subscription: a confirmation, the events after
// the start (exclusive), caught-up, then live events until the client leaves.
func (s *streamsService) subscribe(o *streams.ReadReq_Options, f *filter, structured bool, srv streams.Streams_ReadServer) error {
	d := s.db
	all := o.GetAll() != nil
	name := string(o.GetStream().GetStreamIdentifier().GetStreamName())
	// cursor: the next log index ($all) or the next revision (a stream).
	var cursor int
	// From a position at or past the last record, the server goes live at
	// once and skips records at or before it (Enumerator.AllSubscription*.cs:
	// MainLoop, GoLive); from inside a record, its catch-up fails.
	var live, invalid bool
	var floor position
	if p := o.GetAll().GetPosition(); p != nil {
		if err := positionError(p.GetCommitPosition(), p.GetPreparePosition()); err != nil {
			return err
		}
		floor = position{p.GetCommitPosition(), p.GetPreparePosition()}
	}
	d.mu.Lock()
	if all {
		switch o.GetAll().GetAllOption().(type) {
		case *streams.ReadReq_Options_AllOptions_End:
			cursor = len(d.log)
		case *streams.ReadReq_Options_AllOptions_Position:
			last := d.lastIndexed()
			switch {
			case !floor.before(position{last, last}):
				live, cursor = true, len(d.log)
			case !d.boundary(floor.commit):
				invalid = true
			default:
				cursor = d.indexAfter(floor.commit, floor.prepare)
			}
		}
	} else {
		st := d.streams[name]
		if st != nil && st.tombstoned {
			d.mu.Unlock()
			return streamDeletedError(srv.Context(), name)
		}
		switch v := o.GetStream().GetRevisionOption().(type) {
		case *streams.ReadReq_Options_StreamOptions_End:
			if st != nil {
				cursor = len(st.events)
			}
		case *streams.ReadReq_Options_StreamOptions_Revision:
			cursor = int(v.Revision) + 1
		}
	}
	d.mu.Unlock()

	if err := srv.Send(&streams.ReadResp{Content: &streams.ReadResp_Confirmation{Confirmation: &streams.ReadResp_SubscriptionConfirmation{
		SubscriptionId: uuid.NewString(),
	}}}); err != nil {
		return err
	}
	if invalid {
		return errInvalidPosition
	}
	caughtUp := false
	searched := 0
	for {
		d.mu.Lock()
		var batch []*record
		end := d.next // the position after the batch ($all)
		if all {
			batch = d.log[min(cursor, len(d.log)):]
			cursor = len(d.log)
		} else if st := d.streams[name]; st != nil {
			if cursor < int(st.truncate) {
				cursor = int(st.truncate)
			}
			batch = st.events[min(cursor, len(st.events)):]
			cursor = len(st.events)
		}
		changed, closed := d.changed, d.closed
		d.mu.Unlock()

		for _, r := range batch {
			if live && !floor.before(position{r.pos, r.pos}) {
				continue
			}
			if f.match(r) {
				if err := srv.Send(eventResp(r, all, structured)); err != nil {
					return err
				}
			}
			searched++
			if all && f != nil && searched%f.interval == 0 && !(live && (position{r.end, 0}).before(floor)) {
				// As the server: the next record's position, prepare 0.
				if err := sendCheckpoint(srv, r.end); err != nil {
					return err
				}
			}
		}
		if !caughtUp {
			caughtUp = true
			if all && f != nil && !live {
				// The server checkpoints once more just before caught-up, at
				// the end of what it has sent: not at the log's end now,
				// which may be past records appended since, not yet sent
				// (a subscriber skips records at or before a checkpoint).
				if h := beforeCaughtUp.Load(); h != nil {
					(*h)()
				}
				if err := sendCheckpoint(srv, end); err != nil {
					return err
				}
			}
			if err := srv.Send(&streams.ReadResp{Content: &streams.ReadResp_CaughtUp_{CaughtUp: &streams.ReadResp_CaughtUp{}}}); err != nil {
				return err
			}
		}
		if closed {
			return status.Error(codes.Unavailable, "server is shutting down")
		}
		select {
		case <-changed:
		case <-srv.Context().Done():
			return srv.Context().Err()
		}
	}
}

// position is a position of $all, ordered as the server orders its TFPos.
type position struct{ commit, prepare uint64 }

func (p position) before(q position) bool {
	return p.commit < q.commit || (p.commit == q.commit && p.prepare < q.prepare)
}

// beforeCaughtUp, if set, runs when a subscription has sent what it found
// and is about to checkpoint before caught-up (a test appends there).
var beforeCaughtUp atomic.Pointer[func()]

// sendCheckpoint sends a filtered subscription's checkpoint of shape (C, 0).
func sendCheckpoint(srv streams.Streams_ReadServer, commit uint64) error {
	return srv.Send(&streams.ReadResp{Content: &streams.ReadResp_Checkpoint_{Checkpoint: &streams.ReadResp_Checkpoint{
		CommitPosition: commit, PreparePosition: 0,
	}}})
}

func eventResp(r *record, all, structured bool) *streams.ReadResp {
	ev := &streams.ReadResp_ReadEvent{
		Event: &streams.ReadResp_ReadEvent_RecordedEvent{
			Id:               protoUUID(r.id, structured),
			StreamIdentifier: &shared.StreamIdentifier{StreamName: []byte(r.stream)},
			StreamRevision:   r.revision,
			PreparePosition:  r.pos,
			CommitPosition:   r.pos,
			Metadata:         r.meta,
			CustomMetadata:   r.custom,
			Data:             r.data,
		},
		Position: &streams.ReadResp_ReadEvent_NoPosition{NoPosition: &shared.Empty{}},
	}
	if all {
		ev.Position = &streams.ReadResp_ReadEvent_CommitPosition{CommitPosition: r.pos}
	}
	return &streams.ReadResp{Content: &streams.ReadResp_Event{Event: ev}}
}

func protoUUID(id uuid.UUID, structured bool) *shared.UUID {
	if !structured {
		return &shared.UUID{Value: &shared.UUID_String_{String_: id.String()}}
	}
	return &shared.UUID{Value: &shared.UUID_Structured_{Structured: &shared.UUID_Structured{
		MostSignificantBits:  int64(binary.BigEndian.Uint64(id[:8])),
		LeastSignificantBits: int64(binary.BigEndian.Uint64(id[8:])),
	}}}
}

func fromProtoUUID(u *shared.UUID) (uuid.UUID, error) {
	if s := u.GetStructured(); s != nil {
		var id uuid.UUID
		binary.BigEndian.PutUint64(id[:8], uint64(s.GetMostSignificantBits()))
		binary.BigEndian.PutUint64(id[8:], uint64(s.GetLeastSignificantBits()))
		return id, nil
	}
	id, err := uuid.Parse(u.GetString_())
	if err != nil {
		return uuid.Nil, fmt.Errorf("event id: %w", err)
	}
	return id, nil
}
