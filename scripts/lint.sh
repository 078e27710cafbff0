#!/usr/bin/env bash
# gofmt, go vet and staticcheck must all be clean.
set -euo pipefail
cd "$(dirname "$0")/.."
unformatted="$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"
if [ -n "$unformatted" ]; then
	echo "gofmt needed on:"
	echo "$unformatted"
	exit 1
fi
# Both builds: the production one and the one with the -dev stores.
for tags in "" dev; do
	go vet -tags "$tags" ./...
	go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 -tags "$tags" ./...
done
