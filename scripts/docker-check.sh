#!/usr/bin/env bash
# Checks the deployment files without a Docker engine: the compose file must
# validate and refuse unset passwords, .dockerignore must leave out .git and
# bin/, the Dockerfile's build-stage RUN steps, run here as they are written
# (with /out in a temp dir), must build the binaries, and `make build` must
# write them under their documented names.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v docker-compose >/dev/null 2>&1; then
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo="sudo"
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends docker-compose >/dev/null
fi
out="$(mktemp -d -t sluice-docker.XXXXXX)"
trap 'rm -rf "$out"' EXIT

# The MySQL passwords have no default: unset, compose must refuse to start
# and name the variable (an empty env file keeps a local .env out of it).
: >"$out/empty.env"
export SLUICE_MYSQL_PASSWORD=check SLUICE_MYSQL_ROOT_PASSWORD=check
for var in SLUICE_MYSQL_PASSWORD SLUICE_MYSQL_ROOT_PASSWORD; do
	if env -u "$var" docker-compose --env-file "$out/empty.env" -f docker-compose.yml config --quiet 2>"$out/err"; then
		echo "docker-compose.yml accepts an unset $var"
		exit 1
	fi
	grep -q "$var" "$out/err" || { echo "docker-compose.yml refuses an unset $var without naming it:"; cat "$out/err"; exit 1; }
done
docker-compose --env-file "$out/empty.env" -f docker-compose.yml config --quiet
echo "docker-compose.yml: valid; refuses unset passwords"

# The build context leaves out what the image does not need.
for pattern in .git bin/; do
	grep -qxF "$pattern" .dockerignore || { echo ".dockerignore does not leave out $pattern"; exit 1; }
done
echo ".dockerignore: leaves out .git and bin/"

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

# `make build` writes the binaries under the names the docs, -h and the image use.
make --no-print-directory build BINDIR="$out/make" >/dev/null
for bin in sluice-admin sluice-sync sluice-decide; do
	[ -x "$out/make/$bin" ] || { echo "make build did not write bin/$bin"; exit 1; }
done
echo "make build: writes bin/sluice-admin, bin/sluice-sync, bin/sluice-decide"
