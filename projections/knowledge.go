package projections

import (
	"context"

	"github.com/jackc/pgx/v5"

	"lectern/events"
	"lectern/personal"
)

// KnowledgeProjection maintains knowledge_documents and knowledge_settings:
// one consumer group (a persisted identifier) for the area. A document's
// chunks and reindex jobs are not read models: indexing writes them.
const KnowledgeProjection = "knowledge"

// KnowledgeProjections project knowledge documents.
func KnowledgeProjections() []Projection {
	return []Projection{{Name: KnowledgeProjection, Tables: []string{"knowledge_documents", "knowledge_settings"}, Handlers: []GroupHandler{
		On(func(ctx context.Context, tx pgx.Tx, m events.Meta, e events.KnowledgeDocumentUploaded) error {
			_, err := tx.Exec(ctx, `
				INSERT INTO knowledge_documents (id, user_id, title, content_type, size, created_at, updated_at, version)
				VALUES ($1, $2, $3, $4, $5, $6, $6, $7) ON CONFLICT (id) DO NOTHING`,
				e.KnowledgeID, e.UserID, e.Title, e.ContentType, e.Size, m.RecordedAt, m.Version)
			if err != nil {
				return err
			}
			s := e.Settings
			_, err = tx.Exec(ctx, `
				INSERT INTO knowledge_settings (knowledge_id, top_k, min_score, score_type, reranker_enabled, reranker_model,
					reranker_top_n, created_at, updated_at, version)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $9) ON CONFLICT (knowledge_id) DO NOTHING`,
				e.KnowledgeID, s.TopK, s.MinScore, s.ScoreType, s.RerankerEnabled, s.RerankerModel, s.RerankerTopN, m.RecordedAt, m.Version)
			return err
		}),
		On(func(ctx context.Context, tx pgx.Tx, m events.Meta, e events.KnowledgeSettingsChanged) error {
			s := e.Settings
			_, err := tx.Exec(ctx, `
				UPDATE knowledge_settings SET top_k = $2, min_score = $3, score_type = $4, reranker_enabled = $5,
					reranker_model = $6, reranker_top_n = $7, updated_at = $8, version = $9
				WHERE knowledge_id = $1 AND version < $9`,
				e.KnowledgeID, s.TopK, s.MinScore, s.ScoreType, s.RerankerEnabled, s.RerankerModel, s.RerankerTopN, m.RecordedAt, m.Version)
			return err
		}),
		// The user's documents read as knowledge.document_uploaded at its
		// placeholders; their streams did not move (see crossStream).
		OnSet(func(ctx context.Context, tx pgx.Tx, _ []events.Meta, es []events.UserErased) error {
			_, err := tx.Exec(ctx, `UPDATE knowledge_documents SET title = $2 WHERE user_id = ANY($1::bigint[])`,
				erasedIDs(es), personal.ErasedText)
			if err != nil {
				return err
			}
			// knowledge.settings_changed at its placeholder: no model.
			_, err = tx.Exec(ctx, `UPDATE knowledge_settings SET reranker_model = NULL
				WHERE reranker_model IS NOT NULL AND knowledge_id IN (SELECT id FROM knowledge_documents WHERE user_id = ANY($1::bigint[]))`,
				erasedIDs(es))
			return err
		}),
	}}}
}
