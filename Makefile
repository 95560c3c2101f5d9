# The two commands a newcomer needs: `make run` and `make test` (see README).
GO      ?= go
BIN     := bin/sparkpulse
# The version every build reports (scripts/release.sh): X.Y.Z on a commit
# tagged vX.Y.Z, which must match the VERSION file; elsewhere VERSION's
# X.Y.Z-dev+<short commit>, with .dirty when files changed.
VERSION  := $(shell scripts/release.sh version)
REVISION := $(shell scripts/release.sh revision)
ifeq ($(VERSION),)
$(error no version: see the message of scripts/release.sh version above)
endif
export GO

.PHONY: all build run test check check-deploy fuzz bench bench-load bench-schema bench-fleet bench-history deps clean release release-check

all: build

build:
	$(GO) build -ldflags "-X main.version=$(VERSION) -X main.revision=$(REVISION)" -o $(BIN) ./cmd/sparkpulse

# Static binaries for linux/amd64, linux/arm64 and darwin/arm64 in dist/:
# sparkpulse-<version>-<os>-<arch>.tar.gz (the binary, LICENSE, NOTICE,
# README.md, CHANGELOG.md) and SHA256SUMS.
release:
	scripts/release.sh build

# release, then: SHA256SUMS verified, each archive's files, each binary's
# platform (go version -m and its ELF or Mach-O header), and the host's
# binary's `version` output.
release-check:
	@echo "make: release-check: the release archives built and checked (about 15 s, 2 min 20 s cold)"
	scripts/release.sh check

deps:
	@echo "make: deps: installs what the tests need when it is missing (the first time on 2 cores: InfluxDB 2.7 about 5 min, Docker Compose 3, the rest a few; then seconds)"
	scripts/deps.sh --test

# Local InfluxDB 1.8.10 + sparkpulse + simulated Spark traffic, with a live
# view of what arrives. Ctrl-C stops everything.
run: build
	scripts/deps.sh
	scripts/run-local.sh

# Everything CI runs: formatting, vet, all tests with the race detector
# (integration tests start real influxd 1.8.10 and 2.7.12 servers, real
# Spark and Spark's real GraphiteReporter),
# the container artefacts, the release archives, then short fuzz runs.
test: deps check check-deploy release-check fuzz

# The tests that run sparkpulse as a process (cmd/sparkpulse, realspark)
# take the binary built here, once, from SPARKPULSE_BIN; run alone with
# go test, each package builds its own.
check: build
	@echo "make: check: gofmt, go vet, then every test with the race detector (about 20 min on 2 cores, 18 of them real Spark; a package prints its line when it ends)"
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	SPARKPULSE_BIN="$(abspath $(BIN))" $(GO) test -race -count=1 -timeout 50m ./...

check-deploy:
	@echo "make: check-deploy: the Dockerfile, compose files and Helm chart validated (about 20 s; minutes the first time, with a cold build cache)"
	scripts/check-deploy.sh

# Short fuzz runs. Budgets are counts of inputs, sized to about 15 s each
# on a 2-core machine, not durations: with a duration, Go 1.26's fuzzing
# coordinator can fail a clean run with "context deadline exceeded" as the
# time runs out (golang/go#75804, fixed in Go 1.27).
fuzz:
	@echo "make: fuzz: six short fuzz runs (about 3 min)"
	$(GO) test -run='^$$' -fuzz='^FuzzParse$$' -fuzztime=150000x ./graphite
	$(GO) test -run='^$$' -fuzz='^FuzzApply$$' -fuzztime=600000x ./templates
	$(GO) test -run='^$$' -fuzz='^FuzzApply$$' -fuzztime=1200000x ./spark
	$(GO) test -run='^$$' -fuzz='^FuzzLoad$$' -fuzztime=500000x ./delta
	$(GO) test -run='^$$' -fuzz='^FuzzEncode$$' -fuzztime=150000x ./relay
	$(GO) test -run='^$$' -fuzz='^FuzzDiskQueueOpen$$' -fuzztime=3000x ./queue

bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./...

# The load harness behind docs/performance.md: sparkpulse
# against a bare loader and InfluxDB's own graphite listener, into a real
# influxd, then UDP and a 10-minute soak (about 20 minutes in all).
bench-load:
	scripts/deps.sh
	$(GO) run ./bench $(BENCHFLAGS)

# The built-in mapping's two schemas, wide and cern, side by side on the
# same streams, each into an influxd of its own (bench/README.md; about
# 10 minutes). BENCHFLAGS="-base DIR" adds the relay benchmarks of an
# earlier checkout.
bench-schema:
	scripts/deps.sh
	$(GO) run ./bench -only schema -repeat 4 $(BENCHFLAGS)

# A Spark fleet's days compressed into minutes, into influxd 1.8 (inmem,
# tsi1) and 2.7 in turn, until InfluxDB refuses a point or 15 minutes per
# target have passed (bench/README.md). BENCHFLAGS="-influxd-set
# max-values-per-tag=0", "-rp-duration 30d -shard-duration 1d" and the like
# re-run it on another InfluxDB setup.
bench-fleet:
	scripts/deps.sh
	scripts/influxd2.sh >/dev/null
	$(GO) run ./bench -only fleet -budget 15m $(BENCHFLAGS)

# A year of a 5 000-applications-a-day fleet's spark_app_history in influxd
# 1.8 (tsi1), and the time of every query of the history dashboard and of
# report --fleet over 30, 90 and 365 days (bench/README.md; about 15
# minutes).
bench-history:
	scripts/deps.sh
	$(GO) run ./bench -only history $(BENCHFLAGS)

clean:
	rm -rf bin .run dist
