package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"lectern/aggregates"
	"lectern/knowledge"
	"lectern/mail"
	"lectern/pgtest"
	"lectern/projections"
	"lectern/service"
)

// knowledgeBench indexes a document of 10 000 chunks with the offline
// embedder through the service, then searches it.
func knowledgeBench(ctx context.Context, base string) error {
	pool, _, err := pgtest.NewDatabase(ctx, base)
	if err != nil {
		return err
	}
	defer pool.Close()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	svc, err := service.New(service.Config{Pool: pool, JWTKey: key, Mail: mail.NewLogSender(quiet), Logger: quiet})
	if err != nil {
		return err
	}
	defer svc.Close()
	stop := svc.RunBackground(ctx, true)
	defer stop()
	user, _, err := svc.Identity.CreateUser(ctx, "reader@example.com", "bench-password", "Reader", false)
	if err != nil {
		return err
	}

	// About 10 000 chunks of distinct text.
	var b strings.Builder
	for i := 0; b.Len() < 10_000*(knowledge.ChunkSize-knowledge.ChunkOverlap); i++ {
		fmt.Fprintf(&b, "Paragraph %d explains topic %d of subject %d with example %d and note %d. ", i, i%997, i%89, i*7, i%13)
	}
	text := b.String()

	// Baseline: chunking and embedding alone, no storage.
	start := time.Now()
	chunks := knowledge.Chunk(text, knowledge.ChunkSize, knowledge.ChunkOverlap)
	if _, err := knowledge.NewOffline().Embed(ctx, chunks); err != nil {
		return err
	}
	embedOnly := float64(len(chunks)) / time.Since(start).Seconds()

	start = time.Now()
	doc, n, res, err := svc.Commands.Knowledge.Upload(ctx, aggregates.UploadKnowledgeDocument{OwnerID: user.ID, Title: "Big", ContentType: "text/plain",
		Size: int64(len(text)), Content: text})
	if err != nil {
		return err
	}
	indexRate := float64(n) / time.Since(start).Seconds()
	waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := svc.Listener.WaitFor(waitCtx, res.Position, projections.KnowledgeProjection); err != nil {
		return fmt.Errorf("knowledge projection: %w", err)
	}

	var lat, load []time.Duration
	for i := range 200 {
		q := fmt.Sprintf("topic %d subject %d", i%997, i%89)
		t := time.Now()
		if _, err := svc.Search.Search(ctx, user.ID, doc.ID, q); err != nil {
			return err
		}
		lat = append(lat, time.Since(t))
		t = time.Now()
		rows, err := pool.Query(ctx, `SELECT id, text, embedding FROM knowledge_chunks WHERE knowledge_id = $1 ORDER BY ord`, doc.ID)
		if err != nil {
			return err
		}
		for rows.Next() {
		}
		rows.Close()
		load = append(load, time.Since(t))
	}
	sortDurations(lat)
	sortDurations(load)
	fmt.Printf("\n## Knowledge: %d chunks, offline embedder\n", n)
	fmt.Printf("%-34s %10.0f   (baseline: chunking and embedding only, %0.f chunks/s)\n", "indexing chunks/s (with storage)", indexRate, embedOnly)
	fmt.Printf("%-34s %10s %10s\n", "", "p50", "p99")
	fmt.Printf("%-34s %10s %10s   (target p99 < 20 ms)\n", "search over the document", ms(percentile(lat, .5)), ms(percentile(lat, .99)))
	fmt.Printf("%-34s %10s %10s   (baseline: reading its chunks)\n", "read all chunks (SQL)", ms(percentile(load, .5)), ms(percentile(load, .99)))
	return nil
}
