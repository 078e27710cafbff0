.PHONY: test test-short lint build run

# Installs and starts real MariaDB and Redis servers, then runs every test.
test:
	./scripts/test.sh

test-short:
	./scripts/test.sh -short

lint:
	./scripts/lint.sh

build:
	go build ./...

run:
	go run -tags dev ./cmd/admin -dev
