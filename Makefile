# Lectern. `make run` serves the API; `make test` runs every test against a
# throwaway PostgreSQL (or DATABASE_URL when set).
.PHONY: run test bench lint fmt vet stop-db tools

GO ?= go

run:
	scripts/run.sh

# scripts/test.sh: every package under -race, the HTTP suite a second time
# with EventStoreDB (the in-process fake) as the event store, then the API
# fuzzed for FUZZTIME with malformed input.
FUZZTIME ?= 30s
test:
	scripts/with-postgres.sh --per-package env GO=$(GO) FUZZTIME=$(FUZZTIME) scripts/test.sh

# pg_stat_statements lets the bench count statements per request.
bench:
	LECTERN_PG_PRELOAD=pg_stat_statements scripts/with-postgres.sh $(GO) run ./cmd/lectern-bench

fmt:
	gofmt -w $$(git ls-files '*.go')

vet:
	$(GO) vet ./...

lint: vet
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) tool golangci-lint run ./...

stop-db:
	scripts/pg.sh stop "$$PWD/.data/pg"
