# Lectern. `make run` serves the API; `make test` runs every test against a
# throwaway PostgreSQL (or DATABASE_URL when set).
.PHONY: run test bench lint fmt vet stop-db tools

GO ?= go

run:
	scripts/run.sh

# The HTTP suite runs a second time with EventStoreDB (the in-process fake)
# as the event store: only api/ reads LECTERN_TEST_EVENT_STORE.
# Then the API is fuzzed for FUZZTIME with malformed input (FuzzOperations;
# its seeds already ran with the rest of the suite).
FUZZTIME ?= 20s
test:
	scripts/with-postgres.sh --per-package sh -c '$(GO) test -race -count=1 ./... && LECTERN_TEST_EVENT_STORE=esdbfake $(GO) test -race -count=1 -skip FuzzOperations ./api/ && $(GO) test -count=1 -run "^$$" -fuzz "^FuzzOperations$$" -fuzztime $(FUZZTIME) ./api/'

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
