#!/usr/bin/env bash
# make test: every package's tests, with the end-to-end package (tests/e2e, by far the longest)
# run as E2E_LANES processes side by side, each on its own local cluster and operator, sharing
# its tests through a claim directory (see lane() in tests/e2e/lane_test.go). The other packages
# run meanwhile under one `go test`. Each lane's output goes to its own file, printed when it ends;
# the exit status is non-zero if any part failed.
set -uo pipefail
cd "$(dirname "$0")/.."

lanes=${E2E_LANES:-3}
timeout=${TEST_TIMEOUT:-80m}
work=$(mktemp -d /tmp/valkey-operator-test.XXXXXX)
mkdir -p "$work/queue"
start=$(date +%s)

go test -c -o "$work/e2e.test" ./tests/e2e/ || exit 1

others=$(go list ./... | grep -v '/tests/e2e$')
# shellcheck disable=SC2086 # a list of packages
(go test -count=1 -timeout "$timeout" $others >"$work/others.log" 2>&1; echo $? >"$work/others.rc") &

for i in $(seq 1 "$lanes"); do
	# The test binary runs in its package's directory, as go test runs it (testdata, the guard
	# test reading the package's sources).
	(cd tests/e2e && E2E_QUEUE="$work/queue" E2E_LANE="$i" \
		"$work/e2e.test" -test.count=1 -test.timeout "$timeout" -test.v >"$work/lane$i.log" 2>&1
	echo $? >"$work/lane$i.rc"; echo "$(date +%s)" >"$work/lane$i.end") &
done
wait

rc=0
summary=()
for i in $(seq 1 "$lanes"); do
	r=$(cat "$work/lane$i.rc")
	# Only what go test prints without -v, plus the failures' output: the passing tests' logs stay
	# in the lane's file.
	echo "=== e2e lane $i (exit $r, $(($(cat "$work/lane$i.end") - start)) s) ==="
	if [ "$r" = 0 ]; then
		grep -E '^(--- (PASS|FAIL)|ok|PASS$|FAIL)' "$work/lane$i.log" | grep -v -- '--- SKIP'
	else
		cat "$work/lane$i.log"
		rc=1
	fi
	summary+=("lane $i: $(grep -c '^--- PASS' "$work/lane$i.log") passed, $(grep -c '^--- FAIL' "$work/lane$i.log") failed, exit $r, $(($(cat "$work/lane$i.end") - start)) s")
done
echo "=== other packages (exit $(cat "$work/others.rc")) ==="
cat "$work/others.log"
[ "$(cat "$work/others.rc")" = 0 ] || rc=1

# Every e2e test must have been claimed by a lane: one that no lane reached (a lane that died)
# is a failure too.
want=$(grep -h '^func Test' tests/e2e/*_test.go | grep -v -c 'TestMain\|TestEveryTestTakesALane')
got=$(find "$work/queue" -type f | wc -l)
echo "=== summary: $((($(date +%s) - start) / 60)) min $((($(date +%s) - start) % 60)) s ==="
printf '%s\n' "${summary[@]}"
echo "e2e tests claimed: $got of $want"
[ "$got" = "$want" ] || rc=1

if [ "$rc" = 0 ] && [ -z "${TEST_KEEP:-}" ]; then
	rm -rf "$work"
else
	echo "lane logs kept in $work"
fi
exit $rc
