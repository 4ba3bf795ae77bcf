# The usual targets over the project's own scripts: scripts/test is what CI runs (through .ci/run).
GO ?= go
BIN ?= bin

.PHONY: build test bench lint release

## build: the weir binary in $(BIN)/weir
build:
	$(GO) build -o $(BIN)/weir ./cmd/weir

## test: gofmt, vet, golangci-lint, the race suite and the fuzz targets (scripts/test)
test:
	scripts/test

## bench: the Go benchmarks (BENCH picks them, PKG the packages); bench/run.sh is the side-by-side run
BENCH ?= .
PKG ?= ./...
bench:
	$(GO) test -run='^$$' -bench='$(BENCH)' $(PKG)

## lint: golangci-lint with .golangci.yml (.ci/run installs the pinned version)
lint:
	golangci-lint run ./...

## release: static binaries for linux and darwin, amd64 and arm64, with SHA256SUMS, in $(BIN)/release
release:
	scripts/release $(BIN)/release
