#!/bin/sh
# idle-bench.sh: what an idle `refill worker` and `refill serve` cost.
#
# Writes a project of N datasets (default 1000) whose state store is a fresh
# PostgreSQL database (or SQLite with STATE=sqlite), starts one process,
# lets it settle, then counts over WINDOW seconds (default 60):
#   - state-store transactions/s: xact_commit + xact_rollback of its
#     database in pg_stat_database (PostgreSQL only);
#   - CPU: utime + stime of the process from /proc/PID/stat, as a share of
#     one core.
#
#   scripts/idle-bench.sh worker            # PostgreSQL, 1,000 datasets
#   N=200 WINDOW=30 scripts/idle-bench.sh serve
#   STATE=sqlite scripts/idle-bench.sh serve
#
# Needs: go, sqlite3, psql on 127.0.0.1:5432 (trust auth) for PostgreSQL.
set -eu
what=${1:-worker}
N=${N:-1000}
WINDOW=${WINDOW:-60}
SETTLE=${SETTLE:-10}
STATE=${STATE:-postgres}
PGURL=${PGURL:-postgres://postgres@127.0.0.1:5432}
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; [ "$STATE" = postgres ] && psql -q "$PGURL/postgres" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1; rm -rf "$dir"' EXIT
pid=0
db=refill_idle_$$

(cd "$root" && go build -o "$dir/refill" ./cmd/refill)
if [ "$STATE" = postgres ]; then
	psql -q "$PGURL/postgres" -c "CREATE DATABASE $db" >/dev/null
	state="$PGURL/$db"
else
	state="sqlite:state.db"
fi
{
	echo "version: 1"
	echo "warehouse: sqlite:warehouse.db"
	echo "state: $state"
	# A notice target and a schedule, so that serve runs every River
	# client it has: partitions (PostgreSQL), notices, watcher ticks.
	echo "notify: {webhooks: [{url: \"http://127.0.0.1:9/hook\", secret_env: IDLE_HOOK_SECRET}]}"
	echo "watch: {interval: 1h}"
	echo "datasets:"
	echo "  src: {table: src, partition: {column: day}}"
	echo "  daily: {table: daily, partition: {column: day}, upstream: [src], schedule: {every: day}, job: {query: \"SELECT day, count(*) AS n FROM src WHERE day = :partition GROUP BY day\"}}"
	i=1
	while [ "$i" -lt "$((N - 1))" ]; do
		echo "  d$i: {table: d$i, partition: {column: day}, upstream: [src], job: {query: \"SELECT day, count(*) AS n FROM src WHERE day = :partition GROUP BY day\"}}"
		i=$((i + 1))
	done
} >"$dir/refill.yaml"

cd "$dir"
sqlite3 warehouse.db "CREATE TABLE src (day TEXT, v INTEGER); CREATE TABLE daily (day TEXT, n INTEGER)"
export IDLE_HOOK_SECRET=idle-bench-secret
case "$what" in
worker) ./refill worker >worker.log 2>&1 & ;;
serve) ./refill serve --addr 127.0.0.1:0 >serve.log 2>&1 & ;;
*) echo "usage: $0 worker|serve" >&2; exit 2 ;;
esac
pid=$!
sleep "$SETTLE"
kill -0 "$pid" || { cat ./*.log >&2; exit 1; }

xacts() {
	psql -qtA "$PGURL/postgres" -c "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = '$db'"
}
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
hz=$(getconf CLK_TCK)
[ "$STATE" = postgres ] && x0=$(xacts)
t0=$(ticks)
sleep "$WINDOW"
t1=$(ticks)
[ "$STATE" = postgres ] && x1=$(xacts)
# The two psql reads are transactions of their own (on another database,
# so they do not count here).
echo "idle $what, $N datasets, $STATE state store, ${WINDOW}s:"
[ "$STATE" = postgres ] && awk -v a="$x0" -v b="$x1" -v w="$WINDOW" 'BEGIN { printf "  state-store transactions/s: %.2f\n", (b - a) / w }'
awk -v a="$t0" -v b="$t1" -v w="$WINDOW" -v hz="$hz" 'BEGIN { printf "  CPU: %.2f%% of one core\n", 100 * (b - a) / hz / w }'
