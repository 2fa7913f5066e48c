#!/bin/sh
# Runs the whole suite N times back to back (default 10) while a second
# `go test ./...` runs beside it in a loop, as a loaded machine would: the
# suite must not fail once. Prints each run's wall time and result, and
# the failures' tests; logs stay in $OUT (default a new temp directory).
#
#   scripts/stress.sh [N]
set -u
N=${1:-10}
OUT=${OUT:-$(mktemp -d)}
cd "$(dirname "$0")/.."
go test -count=1 -run '^$' ./... >/dev/null || exit 1 # compiled once, outside the figures
: >"$OUT/stop.not"
(
	i=0
	while [ -e "$OUT/stop.not" ]; do
		i=$((i + 1))
		if go test -count=1 ./... >"$OUT/beside.$i.log" 2>&1; then
			echo "beside $i: ok" >>"$OUT/beside.txt"
		else
			echo "beside $i: FAIL" >>"$OUT/beside.txt"
		fi
	done
) &
beside=$!
fails=0
for i in $(seq 1 "$N"); do
	start=$(date +%s)
	if go test -count=1 ./... >"$OUT/run.$i.log" 2>&1; then
		result=ok
	else
		result=FAIL
		fails=$((fails + 1))
	fi
	echo "run $i: $result in $(($(date +%s) - start)) s"
	[ "$result" = ok ] || grep -E '^(--- FAIL|FAIL)' "$OUT/run.$i.log" | sed 's/^/    /'
done
rm -f "$OUT/stop.not"
wait "$beside"
echo "beside: $(grep -c ': ok' "$OUT/beside.txt") ok, $(grep -c FAIL "$OUT/beside.txt") failed"
grep -l '^--- FAIL' "$OUT"/beside.*.log 2>/dev/null | while read -r f; do grep -E '^(--- FAIL|FAIL)' "$f" | sed "s|^|    $(basename "$f"): |"; done
echo "$fails of $N runs failed; logs in $OUT"
[ "$fails" -eq 0 ]
