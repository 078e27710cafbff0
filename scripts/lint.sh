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
# Every module of go.work (./... alone covers the root module only).
# shellcheck source=scripts/modules.sh
. scripts/modules.sh
# Each module's go.mod must be tidy on its own: a service requiring a nested
# module reads that go.mod, never go.work.
for pattern in "${module_patterns[@]}"; do
	dir="${pattern%/...}"
	(cd "$dir" && GOWORK=off go mod tidy -diff) || {
		echo "go mod tidy needed in $dir (GOWORK=off); a nested module's code and tests must not"
		echo "import packages of a module it does not require, such as the root's internal/testenv"
		exit 1
	}
done
# A nested module must not build with an older version of a module the root
# module also uses.
./scripts/modversions.sh
# Both builds: the production one and the one with the -dev stores.
for tags in "" dev; do
	go vet -tags "$tags" "${module_patterns[@]}"
	go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 -tags "$tags" "${module_patterns[@]}"
done
# A service that imports only the client loads the client's module graph:
# it stays small (docs/decisions.md, "The client's module graph").
client_modules="$(cd client && GOWORK=off go list -m all | wc -l)"
if [ "$client_modules" -gt 15 ]; then
	echo "the client's module graph lists $client_modules modules (at most 15)"
	exit 1
fi
