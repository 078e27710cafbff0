.PHONY: test test-short soak lint build run

# scripts/modules.sh (the modules of go.work) is a bash script.
SHELL := /bin/bash

# Installs and starts real MariaDB and Redis servers, then runs every test.
test:
	./scripts/test.sh

test-short:
	./scripts/test.sh -short

# The same suite with the long real-time scenarios (SLUICE_SOAK=1): the 60 s
# slow-rate run, the 10 s multi-process and outage runs, and the brief's
# wall-clock figures. Run it on a machine left to it.
soak:
	SLUICE_SOAK=1 ./scripts/test.sh -timeout 45m

lint:
	./scripts/lint.sh

# Checks that every module of go.work compiles (./... alone covers the root
# module only), then writes the three binaries under the names the docs, -h
# and the image use: bin/sluice-admin, bin/sluice-sync, bin/sluice-decide.
BINDIR ?= bin
build:
	. scripts/modules.sh && go build "$${module_patterns[@]}"
	for cmd in admin sync decide; do go build -o "$(BINDIR)/sluice-$$cmd" "./cmd/$$cmd" || exit 1; done

run:
	go run -tags dev ./cmd/admin -dev
