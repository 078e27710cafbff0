#!/usr/bin/env bash
# Prepares a release of every module of go.work at one version. Inside the
# repository the modules require each other at a placeholder version and
# replace it with their directories; a service's go.mod ignores those
# replace directives, so a release sets every requirement between this
# repository's modules to the release version, and tags each module (the
# root as vX.Y.Z, a nested one as <dir>/vX.Y.Z, as Go resolves them) on the
# same commit. Then `go get github.com/sluicehq/sluice/client@vX.Y.Z` gets
# the contract, the name rule and the limits of that very commit.
#
# Usage: scripts/release-modules.sh vX.Y.Z
# It edits the go.mod files and prints the tags to create once they are
# committed; it commits and pushes nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
version="${1:-}"
if ! [[ "$version" =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
	echo "usage: $0 vX.Y.Z" >&2
	exit 2
fi
# shellcheck source=scripts/modules.sh
. scripts/modules.sh
root="$(GOWORK=off go list -m)"
tags=()
for pattern in "${module_patterns[@]}"; do
	dir="${pattern%/...}"
	dir="${dir#./}"
	reqs="$(cd "$dir" && GOWORK=off go mod edit -json | awk -v root="$root" '
		/"Require"/ { inreq = 1 }
		/"(Replace|Exclude|Retract|Tool|Godebug)"/ { inreq = 0 }
		inreq && $1 == "\"Path\":" { p = $2; gsub(/[",]/, "", p); if (p == root || index(p, root "/") == 1) print p }')"
	for req in $reqs; do
		(cd "$dir" && GOWORK=off go mod edit -require="$req@$version")
	done
	if [ "$dir" = . ]; then
		tags+=("$version")
	elif [ "$dir" != bench ]; then # a harness: nothing requires it
		tags+=("$dir/$version")
	fi
done
echo "go.mod files now require $version of this repository's modules; commit them, then:"
for tag in "${tags[@]}"; do
	echo "  git tag $tag"
done
