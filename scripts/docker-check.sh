#!/usr/bin/env bash
# Checks the deployment files without a Docker engine: the compose file must
# validate, and the Dockerfile's build-stage RUN steps, run here as they are
# written (with /out in a temp dir), must build the binaries.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v docker-compose >/dev/null 2>&1; then
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo="sudo"
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends docker-compose >/dev/null
fi
docker-compose -f docker-compose.yml config --quiet
echo "docker-compose.yml: valid"

# `go mod download` runs before `COPY . .`: the go.mod (and go.sum, when the
# module has one) of every nested module the root replaces must be copied
# first, or the image fails to build where the RUN steps below succeed.
for dir in $(GOWORK=off go mod edit -json | awk -F'"' '/"Path": "\.\//{print substr($4, 3)}'); do
	for f in go.mod go.sum; do
		[ -f "$dir/$f" ] || continue
		grep -Eq "^COPY( .*)? $dir/$f( |$)" Dockerfile || {
			echo "Dockerfile does not copy $dir/$f before go mod download"
			exit 1
		}
	done
done
echo "Dockerfile copies the nested modules' go.mod files"

out="$(mktemp -d -t sluice-docker.XXXXXX)"
trap 'rm -rf "$out"' EXIT
# The build stage ends at the second FROM.
steps="$(awk '/^FROM /{n++} n==1 && /^RUN /{sub(/^RUN /, ""); print}' Dockerfile)"
[ -n "$steps" ] || { echo "no RUN steps found in the Dockerfile build stage"; exit 1; }
while IFS= read -r step; do
	step="${step//\/out/$out}"
	echo "+ $step"
	bash -c "$step"
done <<<"$steps"
for bin in sluice-admin sluice-sync sluice-decide; do
	[ -x "$out/$bin" ] || { echo "Dockerfile did not build $bin"; exit 1; }
	if file "$out/$bin" 2>/dev/null | grep -q 'dynamically linked'; then
		echo "$bin is not static"
		exit 1
	fi
done
echo "Dockerfile build steps: ok"
