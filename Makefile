.PHONY: test test-short soak soak-decide lint build run

# scripts/modules.sh (the modules of go.work) is a bash script.
SHELL := /bin/bash

# Installs and starts real MariaDB and Redis servers, then runs every test.
test:
	./scripts/test.sh

test-short:
	./scripts/test.sh -short

# The same suite with the long real-time scenarios (SLUICE_SOAK=1): the 60 s
# slow-rate run, the 10 s multi-process and outage runs, the brief's
# wall-clock figures, and an hour of the decision service under churning
# connections (TestDecisionSoak; SLUICE_SOAK_DURATION=3m shortens it). Run it
# on a machine left to it.
soak:
	SLUICE_SOAK=1 ./scripts/test.sh -timeout 90m

# The decision service's soak alone, for SLUICE_SOAK_DURATION (default 1h),
# without the race detector, whose own memory would hide the service's RSS.
soak-decide:
	SLUICE_SOAK=1 ./scripts/test.sh -race=false -timeout 90m -run TestDecisionSoak -v

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
