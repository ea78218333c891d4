package commands

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"lectern/auth"
	"lectern/events"
	"lectern/eventstore/postgres"
	"lectern/mail"
	"lectern/pgtest"
)

// countedStatements counts the statements a pool sends.
type countedStatements struct{ n atomic.Int64 }

func (c *countedStatements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *countedStatements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// A wrong password costs the same work for an account as for an unknown
// e-mail, so that its answer's time does not tell accounts apart: as many
// statements, and no event stream read (the account is read once its
// password matched). Before, an account's failed login also read its
// stream and its credentials, and took measurably longer.
func TestAFailedLoginCostsTheSameForAnAccountAsForNone(t *testing.T) {
	ctx := context.Background()
	base := pgtest.Fresh(t)
	cfg := base.Config() // a copy: its database, search path and all
	statements := &countedStatements{}
	cfg.ConnConfig.Tracer = statements
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	pg := postgres.New(pool, nil)
	t.Cleanup(pg.Close)
	store := &countingStore{Store: pg}
	tokens, err := auth.NewTokens([]byte("0123456789abcdef0123456789abcdef"), nil)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	id, err := NewIdentity(Deps{Store: store, Registry: events.NewRegistry(), DB: pool, Now: time.Now, IDs: NewSequences(pool),
		Tokens: tokens, Mail: mail.NewLogSender(logger), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := id.CreateUser(ctx, "ada@example.com", "correct horse battery", "Ada", false); err != nil {
		t.Fatal(err)
	}
	failed := func(email, addr string) (int64, int64) {
		t.Helper()
		statements.n.Store(0)
		store.reads.Store(0)
		if _, err := id.Login(ctx, email, "wrong password", addr); !errors.Is(err, errBadLogin) {
			t.Fatalf("login of %s: %v, want a bad login", email, err)
		}
		return statements.n.Load(), store.reads.Load()
	}
	accountStatements, accountReads := failed("ada@example.com", "192.0.2.1")
	noneStatements, noneReads := failed("nobody@example.com", "192.0.2.2")
	if accountStatements != noneStatements || accountReads != 0 || noneReads != 0 {
		t.Errorf("a failed login: of an account %d statements and %d stream reads, of an unknown e-mail %d and %d; want the same, and no stream read",
			accountStatements, accountReads, noneStatements, noneReads)
	}
	if _, err := id.Login(ctx, "ada@example.com", "correct horse battery", "192.0.2.1"); err != nil {
		t.Errorf("the right password: %v", err)
	}
}
