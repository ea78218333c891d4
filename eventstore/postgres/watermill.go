package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"

	"lectern/eventstore"
)

// Topic is the Watermill topic name of the events table.
const Topic = "events"

// Message metadata keys the schema adapter fills from the events table.
const (
	MetaEventType     = "event_type"
	MetaSchemaVersion = "schema_version"
	MetaStreamID      = "stream_id"
	MetaVersion       = "version"
	MetaPosition      = "position"
	MetaRecordedAt    = "recorded_at"
	MetaMetadata      = "metadata"
)

// Schema is watermill-sql's PostgreSQL schema adapter over the events table:
// the default schema's ordering by (transaction_id, offset) below the
// pg_snapshot_xmin horizon, with the stream columns added to each message.
// Events are appended by Store, never published through Watermill.
type Schema struct {
	wsql.DefaultPostgreSQLSchema
}

// NewSchema returns the adapter reading batch events per query.
func NewSchema(batch int) Schema {
	return Schema{wsql.DefaultPostgreSQLSchema{
		GenerateMessagesTableName: func(string) string { return Topic },
		SubscribeBatchSize:        batch,
	}}
}

// SchemaInitializingQueries returns nothing: migrations own the schema.
func (Schema) SchemaInitializingQueries(wsql.SchemaInitializingQueriesParams) ([]wsql.Query, error) {
	return nil, nil
}

// InsertQuery refuses: events are appended through the event store only.
func (Schema) InsertQuery(wsql.InsertQueryParams) (wsql.Query, error) {
	return wsql.Query{}, errors.New("events are appended through the event store, not published")
}

// SelectQuery is the default PostgreSQL query with the stream columns. A
// page of more than one event ends with a transaction's last event: a poll
// is one transaction of the projection's (watermill-sql), so an append's
// events, which are one transaction of the store's, are applied together
// and no read sees half of an append (a session without its first turn).
// The page may then pass batch by the rest of its last transaction, up to
// batch more: a transaction longer than that is one of grouped appends
// (batch.go: at most maxBatch, of one event each, so a cut falls between
// two appends) or an append of over batch events, which is then applied in
// parts. A page of one (a projection going carefully past a failure) stays
// one.
func (s Schema) SelectQuery(params wsql.SelectQueryParams) (wsql.Query, error) {
	next, err := params.OffsetsAdapter.NextOffsetQuery(wsql.NextOffsetQueryParams{Topic: params.Topic, ConsumerGroup: params.ConsumerGroup})
	if err != nil {
		return wsql.Query{}, err
	}
	batch := s.SubscribeBatchSize
	if batch <= 0 {
		batch = 100
	}
	const columns = `"offset", transaction_id, uuid::text, payload::text, metadata::text, stream_id, version, event_type, schema_version, recorded_at`
	page := `SELECT ` + columns + `
		FROM events
		-- A row comparison is an index range however far behind the group is
		-- (an OR of the two cases is not); no row yet reads as the start.
		WHERE (transaction_id, "offset") > (coalesce((SELECT last_processed_transaction_id FROM last_processed), '0'),
		                                    coalesce((SELECT offset_acked FROM last_processed), 0))
		  AND transaction_id < pg_snapshot_xmin(pg_current_snapshot())
		ORDER BY transaction_id, "offset" LIMIT ` + strconv.Itoa(batch) // limited inside, where the planner sees the LIMIT and walks the index
	if batch == 1 {
		return wsql.Query{Query: `WITH last_processed AS (` + next.Query + `) ` + page, Args: next.Args}, nil
	}
	// Below the horizon every transaction has committed, so the rest of the
	// last one is all there.
	q := `SELECT * FROM (
		WITH last_processed AS (` + next.Query + `),
		page AS MATERIALIZED (` + page + `),
		last AS (SELECT transaction_id, "offset" FROM page ORDER BY transaction_id DESC, "offset" DESC LIMIT 1)
		SELECT * FROM page
		UNION ALL
		(SELECT ` + columns + ` FROM events
		 WHERE (transaction_id, "offset") > (SELECT transaction_id, "offset" FROM last)
		   AND transaction_id = (SELECT transaction_id FROM last)
		 ORDER BY transaction_id, "offset" LIMIT ` + strconv.Itoa(batch) + `)
	) AS messages ORDER BY transaction_id, "offset"`
	return wsql.Query{Query: q, Args: next.Args}, nil
}

// UnmarshalMessage builds the message and its metadata from one row.
func (Schema) UnmarshalMessage(params wsql.UnmarshalMessageParams) (wsql.Row, error) {
	var r wsql.Row
	var txid wsql.XID8
	var payload, meta, stream, eventType string
	var version int64
	var schemaVersion int
	var recordedAt time.Time
	if err := params.Row.Scan(&r.Offset, &txid, &r.UUID, &payload, &meta, &stream, &version, &eventType, &schemaVersion, &recordedAt); err != nil {
		return wsql.Row{}, fmt.Errorf("scan event row: %w", err)
	}
	r.Payload = []byte(payload)
	r.Metadata = []byte(meta)
	msg := message.NewMessage(string(r.UUID), r.Payload)
	msg.Metadata.Set(MetaEventType, eventType)
	msg.Metadata.Set(MetaSchemaVersion, strconv.Itoa(schemaVersion))
	msg.Metadata.Set(MetaStreamID, stream)
	msg.Metadata.Set(MetaVersion, strconv.FormatInt(version, 10))
	msg.Metadata.Set(MetaPosition, strconv.FormatUint(uint64(txid), 10)+"-"+strconv.FormatInt(r.Offset, 10))
	msg.Metadata.Set(MetaRecordedAt, recordedAt.UTC().Format(time.RFC3339Nano))
	msg.Metadata.Set(MetaMetadata, meta)
	r.Msg = msg
	r.ExtraData = map[string]any{"transaction_id": txid}
	return r, nil
}

// Offsets keeps each projection's position in projection_offsets and
// announces every committed advance on the lectern_positions channel, so
// requests waiting to read their own writes wake without polling.
type Offsets struct {
	wsql.DefaultPostgreSQLOffsetsAdapter
}

// NewOffsets returns the offsets adapter.
func NewOffsets() Offsets {
	return Offsets{wsql.DefaultPostgreSQLOffsetsAdapter{
		GenerateMessagesOffsetsTableName: func(string) string { return "projection_offsets" },
	}}
}

// NextOffsetQuery reads the group's offset under a transaction-scoped
// advisory lock instead of the library's SELECT ... FOR UPDATE. A row lock
// gives the poll's transaction an id at once, and an open transaction id
// holds back pg_snapshot_xmin, the cluster-wide horizon below which every
// projection reads: a poll that then waited (the forwarder on a slow broker)
// stalled every read model of every database in the cluster. The advisory
// lock serialises the consumers of a group as the row lock did, and a poll
// takes a transaction id only when it writes (its handlers' rows, its ack).
// With no offset row yet, the query still takes the lock and returns NULLs,
// which SelectQuery reads as the start.
func (Offsets) NextOffsetQuery(params wsql.NextOffsetQueryParams) (wsql.Query, error) {
	return wsql.Query{
		Query: `SELECT o.offset_acked, o.last_processed_transaction_id
			FROM (SELECT ` + offsetLock + `) AS locked
			LEFT JOIN projection_offsets o ON o.consumer_group = $1`,
		Args: []any{params.ConsumerGroup},
	}, nil
}

// offsetLock takes the advisory lock of the group $1 until the transaction ends.
const offsetLock = `pg_advisory_xact_lock(hashtextextended('lectern projection offsets ' || $1, 0))`

// LockOffset takes, until tx ends, the lock every poll of group takes first
// (NextOffsetQuery): a replay swapping a read model in holds it to keep the
// live consumer out.
func LockOffset(ctx context.Context, tx Querier, group string) error {
	_, err := tx.Exec(ctx, `SELECT `+offsetLock, group)
	return err
}

// PositionsChannel is the NOTIFY channel of projection advances; the payload
// is "<consumer group> <position>".
const PositionsChannel = "lectern_positions"

// EventsChannel is the NOTIFY channel raised after committed appends.
const EventsChannel = "lectern_events"

// SchemaInitializingQueries returns nothing: migrations own the schema.
func (Offsets) SchemaInitializingQueries(wsql.OffsetsSchemaInitializingQueriesParams) ([]wsql.Query, error) {
	return nil, nil
}

// AckMessageQuery stores the offset and notifies (delivered at commit). It
// also tells the poll's transaction what the update acknowledges, when that
// transaction wants to know (an AckReceiver: a projection's live batch).
// watermill-sql gives an offsets adapter no transaction, but the acked
// messages carry the poll's in their context (its public TxFromContext):
// the same transaction the update is then executed in.
func (Offsets) AckMessageQuery(params wsql.AckMessageQueryParams) (wsql.Query, error) {
	txid, ok := params.LastRow.ExtraData["transaction_id"].(wsql.XID8)
	if !ok {
		return wsql.Query{}, errors.New("ack: row without transaction id")
	}
	pos := eventstore.Position{Commit: uint64(txid), Prepare: uint64(params.LastRow.Offset)}
	if msg := params.LastRow.Msg; msg != nil {
		if tx, ok := wsql.TxFromContext(msg.Context()); ok {
			if r, ok := tx.(AckReceiver); ok {
				r.Acked(pos)
			}
		}
	}
	return wsql.Query{
		Query: `WITH ack AS (
			INSERT INTO projection_offsets (offset_acked, last_processed_transaction_id, consumer_group)
			VALUES ($1, $2::text::xid8, $3)
			ON CONFLICT (consumer_group) DO UPDATE SET
				offset_acked = excluded.offset_acked,
				last_processed_transaction_id = excluded.last_processed_transaction_id
			RETURNING 1)
		SELECT pg_notify('` + PositionsChannel + `', $4) FROM ack`,
		Args: []any{params.LastRow.Offset, strconv.FormatUint(uint64(txid), 10), params.ConsumerGroup,
			params.ConsumerGroup + " " + pos.String()},
	}, nil
}

// AckReceiver is a poll transaction told, by AckMessageQuery, the position
// the offset's update it is about to execute acknowledges: the last message
// watermill-sql counted as acked.
type AckReceiver interface {
	Acked(pos eventstore.Position)
}

// DecodeMetadata reads the event metadata JSON a message carries.
func DecodeMetadata(msg *message.Message, into any) error {
	return json.Unmarshal([]byte(msg.Metadata.Get(MetaMetadata)), into)
}
