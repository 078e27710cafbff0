#!/usr/bin/env bash
# Runs the whole test suite against real servers on a fresh Debian machine.
# It installs what is missing, starts MariaDB and Redis on free loopback ports
# in a temporary directory, runs the tests and stops the servers by PID, even
# when the tests fail.
set -euo pipefail

cd "$(dirname "$0")/.."

need=()
command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || need+=(mariadb-server)
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v redis-sentinel >/dev/null 2>&1 || need+=(redis-sentinel)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
# The Python reference client's conformance run needs redis-py, which Debian
# installs for the system python3 (a python3 earlier on the PATH may lack it).
python_with_redis() {
	local p
	for p in python3 /usr/bin/python3; do
		if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import redis' >/dev/null 2>&1; then
			command -v "$p"
			return 0
		fi
	done
	return 1
}
python_with_redis >/dev/null || need+=(python3-redis)
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need+=(nginx-light) # auth_request tests of the decision service
if [ ${#need[@]} -gt 0 ]; then
	echo "installing: ${need[*]}"
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo="sudo"
	# Two suites started at once on a new machine both install: apt waits for
	# the other's lock instead of failing.
	apt=($sudo apt-get -o DPkg::Lock::Timeout=600)
	"${apt[@]}" update -qq
	DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
export PATH="$PATH:/usr/sbin"
SLUICE_TEST_PYTHON="$(python_with_redis)" || {
	echo "no python3 can import redis (package python3-redis)"
	exit 1
}
export SLUICE_TEST_PYTHON

tmp="$(mktemp -d -t sluice-test.XXXXXX)"
pids=()
cleanup() {
	for pid in "${pids[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	for pid in "${pids[@]}"; do
		for _ in $(seq 1 50); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -9 "$pid" 2>/dev/null || true
	done
	rm -rf "$tmp"
}
trap cleanup EXIT

# envoyproxy/ratelimit, built from its Go module, answers the same gateway
# requests as the decision service in the import test of cmd/limits.
if [ -z "${SLUICE_ENVOY_RATELIMIT:-}" ]; then
	GOBIN="$tmp/bin" GOFLAGS=-mod=mod GOWORK=off \
		go install github.com/envoyproxy/ratelimit/src/service_cmd@v1.4.1-0.20260122083618-3fb702589d36
	export SLUICE_ENVOY_RATELIMIT="$tmp/bin/service_cmd"
fi

# A random port in a range the kernel does not hand out, that nothing answers on.
free_port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 12000))
		(exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || {
			echo "$p"
			return
		}
	done
}

# MariaDB: a throwaway datadir, root over TCP without a password, loopback only.
mport="$(free_port)"
# A private tmpdir: two suites bootstrapping at once must not share /tmp's
# temporary tables.
mkdir -p "$tmp/mysql/tmp"
mariadb-install-db --no-defaults --datadir="$tmp/mysql/data" --auth-root-authentication-method=normal \
	--skip-test-db --user="$(id -un)" --tmpdir="$tmp/mysql/tmp" >"$tmp/mysql/install.log" 2>&1 || {
	cat "$tmp/mysql/install.log"
	exit 1
}
mariadbd --no-defaults --datadir="$tmp/mysql/data" --tmpdir="$tmp/mysql/tmp" --socket="$tmp/mysql/sock" --pid-file="$tmp/mysql/pid" \
	--bind-address=127.0.0.1 --port="$mport" --user="$(id -un)" --skip-log-bin \
	--innodb-buffer-pool-size=256M --innodb-flush-log-at-trx-commit=2 --max-connections=500 \
	--character-set-server=utf8mb4 --collation-server=utf8mb4_unicode_ci \
	>"$tmp/mysql/server.log" 2>&1 &
pids+=($!)

rport="$(free_port)"
redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no --dir "$tmp" \
	--databases 16 >"$tmp/redis.log" 2>&1 &
pids+=($!)

for _ in $(seq 1 100); do
	if mariadb --no-defaults -h127.0.0.1 -P"$mport" -uroot -e 'SELECT 1' >/dev/null 2>&1; then
		break
	fi
	sleep 0.2
done
mariadb --no-defaults -h127.0.0.1 -P"$mport" -uroot -e 'SELECT VERSION()' >/dev/null || {
	cat "$tmp/mysql/server.log"
	exit 1
}

export SLUICE_TEST_MYSQL_DSN="root@tcp(127.0.0.1:$mport)/"
export SLUICE_TEST_REDIS_ADDR="127.0.0.1:$rport"
export SLUICE_TEST_REQUIRE=1

echo "MariaDB on 127.0.0.1:$mport, Redis on 127.0.0.1:$rport"
status=0
# -tags dev adds the embedded stores of `sluice-admin -dev` and their test;
# the production build of cmd/admin is tested on its own. ./... covers one
# module only: every module of the workspace is named (scripts/modules.sh).
# shellcheck source=scripts/modules.sh
. scripts/modules.sh
go test -race -count=1 -timeout 15m -tags dev "$@" "${module_patterns[@]}" || status=$?
go test -race -count=1 -timeout 5m "$@" ./cmd/admin || status=$?
exit $status
