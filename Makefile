# fedhost: see README.md. `make run` and `make test` do all the set-up on a fresh machine.
SHELL := /bin/bash
GO ?= go
BIN := bin
PLUGIN_DIR := $(BIN)/plugins
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/fedhost/fedhost/host/cli.Version=$(VERSION)

# Every plugin is a main package under plugins/<kind>s/<name>; the binary is fedhost-<kind>-<name>.
PLUGINS := $(wildcard plugins/resources/*/main.go plugins/registrars/*/main.go plugins/apps/*/main.go)

.PHONY: all build plugins artifacts test-artifacts packages run test test-short bench fuzz proto lint tools clean

all: build

build: $(BIN)/fedhost plugins artifacts

$(BIN)/fedhost: FORCE
	$(GO) build -ldflags '$(LDFLAGS)' -o $@ ./host

# The plugins the embedded default runs: `make run` builds only these (and every app),
# `make build` and `make test` all of them.
DEFAULT_PLUGINS := $(wildcard $(addprefix plugins/resources/,$(addsuffix /main.go,embedded local postgresql versitygw localca caddy openldap builtin)) plugins/apps/*/main.go)
PLUGINS_TO_BUILD ?= $(PLUGINS)

plugins:
	@mkdir -p $(PLUGIN_DIR)
	@for main in $(PLUGINS_TO_BUILD); do \
		dir=$$(dirname $$main); name=$$(basename $$dir); \
		kind=$$(basename $$(dirname $$dir)); kind=$${kind%s}; \
		echo "build $(PLUGIN_DIR)/fedhost-$$kind-$$name"; \
		$(GO) build -o $(PLUGIN_DIR)/fedhost-$$kind-$$name ./$$dir || exit 1; \
	done

# Programs the plugins run, built from the Go module proxy (tools pinned in go.mod).
ARTIFACTS := miniflux=miniflux.app/v2 fedhost-miniflux-api=./plugins/apps/miniflux/cmd/fedhost-miniflux-api versitygw=github.com/versity/versitygw/cmd/versitygw caddy=github.com/caddyserver/caddy/v2/cmd/caddy

artifacts:
	@mkdir -p $(BIN)/artifacts
	@for a in $(ARTIFACTS); do \
		echo "build $(BIN)/artifacts/$${a%%=*}"; \
		$(GO) build -o $(BIN)/artifacts/$${a%%=*} $${a#*=} || exit 1; \
	done

# Programs only the tests run (pebble, the ACME test CA of the acme provider's tests;
# mailpit, the SMTP sink of the relay provider's and the invitation mails' tests),
# never built by make build or make run.
TEST_ARTIFACTS := pebble=github.com/letsencrypt/pebble/v2/cmd/pebble mailpit=github.com/axllent/mailpit

test-artifacts:
	@mkdir -p $(BIN)/artifacts
	@for a in $(TEST_ARTIFACTS); do \
		echo "build $(BIN)/artifacts/$${a%%=*}"; \
		$(GO) build -o $(BIN)/artifacts/$${a%%=*} $${a#*=} || exit 1; \
	done

# The embedded default: SQLite, River on SQLite, plugins from bin/plugins.
# The Debian packages fedhost and its tests use (installed when missing, as root).
packages:
	@bash .ci/packages

# The binaries were just built from this tree, so they are locked as they are.
run: packages
	@$(MAKE) --no-print-directory $(BIN)/fedhost plugins artifacts PLUGINS_TO_BUILD="$(DEFAULT_PLUGINS)"
	$(BIN)/fedhost plugins lock
	$(BIN)/fedhost serve

test: packages build test-artifacts
	$(GO) test -count=1 -timeout 60m ./...
	cd sdk && $(GO) test -count=1 -timeout 30m ./...
	cd examples/hello && $(GO) test -count=1 ./...

# Side by side in one run: the sdk against a bare go-plugin echo (the floor) and in-process;
# the front door (Caddy) against the upstream directly.
bench:
	cd sdk && $(GO) test -run '^$$' -bench Call -benchtime 2000x -count 1 ./bench/
	cd sdk && $(GO) test -run '^$$' -bench Start -benchtime 100x -count 1 ./bench/
	$(GO) test -run '^$$' -bench 'Tick$$|EngineTick' -benchmem -benchtime 10x -count 1 ./scheduler/ ./host/deploy/
	$(GO) test -run '^$$' -bench 'FrontDoor$$' -benchtime 3000x -count 1 ./plugins/resources/caddy/
	$(GO) test -run '^$$' -bench FrontDoorWrk -benchtime 1x -count 1 ./plugins/resources/caddy/
	$(GO) test -run '^$$' -bench RouteChange -benchtime 50x -count 1 ./plugins/resources/caddy/
	$(GO) test -run '^$$' -bench Provision -benchtime 5x -count 1 ./plugins/resources/terraform/
	$(GO) test -run '^$$' -bench ScaleQueries -benchtime 20x -count 1 ./host/store/
	$(GO) test -run '^$$' -bench 'Scale$$' -benchtime 1x -count 1 ./host/e2e/
	$(GO) test -run '^$$' -bench ClusterThroughput -benchtime 1x -count 1 -timeout 30m ./host/e2e/

# Every fuzz target (func FuzzXxx in a _test.go file, found with git grep) for FUZZTIME,
# one after the other; FUZZFLAGS adds flags, e.g. FUZZFLAGS=-parallel=1. A crash leaves
# its input in the package's testdata/fuzz/FuzzXxx/, which make test then replays with
# the seed corpus; the other targets still run, and make fuzz fails at the end.
FUZZTIME ?= 30s
FUZZFLAGS ?=

fuzz:
	@failed=""; \
	for file in $$(git grep -l '^func Fuzz' -- '*_test.go'); do \
		dir=$$(dirname $$file); \
		for name in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$file); do \
			echo "fuzz $$dir $$name for $(FUZZTIME)"; \
			(cd $$dir && $(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $(FUZZFLAGS) .) || failed="$$failed $$dir:$$name"; \
		done; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzz targets that failed:$$failed"; exit 1; fi

proto:
	@command -v protoc >/dev/null || { echo "protoc is missing: apt-get install protobuf-compiler"; exit 1; }
	protoc -I sdk/internal/proto \
		--plugin=protoc-gen-go=$$($(GO) tool -n protoc-gen-go) \
		--plugin=protoc-gen-go-grpc=$$($(GO) tool -n protoc-gen-go-grpc) \
		--go_out=sdk --go_opt=module=github.com/fedhost/fedhost/sdk \
		--go-grpc_out=sdk --go-grpc_opt=module=github.com/fedhost/fedhost/sdk \
		sdk/internal/proto/*.proto

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd sdk && $(GO) vet ./...
	cd examples/hello && $(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$')); \
		if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

clean:
	rm -rf $(BIN)

FORCE:
