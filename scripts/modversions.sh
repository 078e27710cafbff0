#!/usr/bin/env bash
# Fails when a nested module resolves an older version of a module the root
# module also resolves: a service that requires only the nested module builds
# with what its own go.mod selects (go.work is not read), so a fix taken in the
# root module (a security release, say) must be taken in every module.
# Compared: the modules that provide a package to a nested module's build or
# tests (go list -deps -test). The rest of `go list -m all` are versions named
# by dependencies' go.mod files that no build reads, which go mod tidy does not
# keep raised.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/modules.sh
. scripts/modules.sh
declare -A root
while read -r path ver _; do
	[ -n "${ver:-}" ] && root[$path]=$ver
done < <(GOWORK=off go list -m all)
status=0
deps=$(mktemp)
trap 'rm -f "$deps"' EXIT
for pattern in "${module_patterns[@]}"; do
	dir="${pattern%/...}"
	[ "$dir" = "." ] && continue
	(cd "$dir" && GOWORK=off go list -deps -test -f '{{with .Module}}{{.Path}} {{.Version}}{{end}}' ./...) | sort -u >"$deps"
	while read -r path ver _; do
		want="${root[$path]:-}"
		if [ -z "${ver:-}" ] || [ -z "$want" ] || [ "$ver" = "$want" ]; then
			continue
		fi
		if [ "$(printf '%s\n%s\n' "$ver" "$want" | sort -V | head -n 1)" = "$ver" ]; then
			echo "$dir resolves $path $ver, older than the root module's $want (cd $dir && go get $path@$want && go mod tidy)"
			status=1
		fi
	done <"$deps"
done
# The workspace must not raise what the root builds with: its tests would
# then run on other versions than the binaries built from its go.mod alone.
skew="$(diff <(GOWORK=off go list -deps -test -f '{{with .Module}}{{.Path}} {{.Version}}{{end}}' ./... | grep -v '^github.com/sluicehq/' | sort -u) \
	<(go list -deps -test -f '{{with .Module}}{{.Path}} {{.Version}}{{end}}' ./... | grep -v '^github.com/sluicehq/' | sort -u))" || {
	echo "the workspace raises modules the root builds with (< root's go.mod, > go.work):"
	echo "$skew"
	status=1
}
exit $status
