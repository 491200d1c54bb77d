#!/usr/bin/env bash
# make test: every package's tests. The end-to-end packages (tests/e2e/<concern>, by far the
# longest) are compiled once and run by E2E_LANES lanes side by side: each lane takes the next
# package from a queue ordered longest-first (hack/e2e-order.txt), runs its test binary (which
# starts its own local cluster and operator, harness.Main) and moves on; the local clusters' slots
# (tests/localcluster.Slots) let that many run at once. The other packages run meanwhile under one
# `go test`. Each package's output goes to its own file, printed when all are done (in full for a
# package that failed); the exit status is non-zero if any part failed or any e2e package or test
# did not run.
set -uo pipefail
cd "$(dirname "$0")/.."

lanes=${E2E_LANES:-3}
timeout=${TEST_TIMEOUT:-80m}
work=$(mktemp -d /tmp/valkey-operator-test.XXXXXX)
mkdir -p "$work/bin" "$work/claim"
start=$(date +%s)
since() { echo $(($(date +%s) - start)); }

# One operator binary for every package (E2E_OPERATOR, read by harness.StartEnv) and one test
# binary per package, built by one go command (its builds run in parallel). tests/bench is only
# compiled here: `make bench` runs it.
go build -o "$work/valkey-operator" . || exit 1
go test -c -o "$work/bin/" ./tests/e2e/... ./tests/bench/ || exit 1
echo "built the operator and the e2e test binaries in $(since) s"

pkgs=$(go list ./tests/e2e/... | sed 's#.*/tests/e2e/##')
# The queue: the order file's packages that exist, then any package it does not name.
queue=$( (grep -v '^#' hack/e2e-order.txt | awk '{print $1}'; echo "$pkgs") | awk 'NF && !seen[$0]++' |
	grep -Fxf <(echo "$pkgs"))

# How many tests each package declares, read now with the binaries it was built from.
for p in $queue; do
	grep -h '^func Test' "tests/e2e/$p"/*_test.go | grep -vc '^func TestMain(' >"$work/$p.want"
done

others=$(go list ./... | grep -v -e '/tests/e2e/' -e '/tests/bench$')
# shellcheck disable=SC2086 # a list of packages
(go test -count=1 -timeout "$timeout" $others >"$work/others.log" 2>&1; echo $? >"$work/others.rc") &

for i in $(seq 1 "$lanes"); do
	(
		for p in $queue; do
			# The first lane to create the claim runs the package.
			mkdir "$work/claim/$p" 2>/dev/null || continue
			echo "$i" >"$work/$p.lane"
			since >"$work/$p.start"
			# The test binary runs in its package's directory, as go test runs it (testdata).
			(cd "tests/e2e/$p" && E2E_OPERATOR="$work/valkey-operator" \
				"$work/bin/$p.test" -test.count=1 -test.timeout "$timeout" -test.v >"$work/$p.log" 2>&1
			echo $? >"$work/$p.rc")
			since >"$work/$p.end"
		done
		since >"$work/lane$i.end"
	) &
done
wait

rc=0
for p in $queue; do
	if [ ! -f "$work/$p.rc" ]; then
		echo "=== e2e $p: not run ==="
		rc=1
		continue
	fi
	r=$(cat "$work/$p.rc")
	echo "=== e2e $p (lane $(cat "$work/$p.lane"), exit $r, $(($(cat "$work/$p.end") - $(cat "$work/$p.start"))) s) ==="
	if [ "$r" = 0 ]; then
		# Only what go test prints without -v: the passing tests' logs stay in the package's file.
		grep -E '^(--- (PASS|FAIL|SKIP)|ok|PASS$|FAIL)' "$work/$p.log"
	else
		cat "$work/$p.log"
		rc=1
	fi
done
echo "=== other packages (exit $(cat "$work/others.rc")) ==="
cat "$work/others.log"
[ "$(cat "$work/others.rc")" = 0 ] || rc=1

echo "=== summary: $(($(since) / 60)) min $(($(since) % 60)) s ==="
for i in $(seq 1 "$lanes"); do
	ran=""
	for p in $queue; do
		[ "$(cat "$work/$p.lane" 2>/dev/null)" = "$i" ] &&
			ran+=" $p ($(($(cat "$work/$p.end") - $(cat "$work/$p.start"))) s, exit $(cat "$work/$p.rc"))"
	done
	echo "lane $i: ended at $(cat "$work/lane$i.end") s:$ran"
done
# Every test of every e2e package must have run: a package that died midway (a panic, the
# timeout) or a test that no longer runs shows here.
want=0 got=0
for p in $queue; do
	w=$(cat "$work/$p.want")
	g=$(grep -cE '^--- (PASS|FAIL|SKIP)' "$work/$p.log" 2>/dev/null || true)
	g=${g:-0}
	[ "$g" = "$w" ] || echo "e2e $p: $g of $w tests ran"
	want=$((want + w)) got=$((got + g))
done
echo "e2e tests run: $got of $want ($(cat "$work"/*.log | grep -c "^--- PASS") passed)"
[ "$got" = "$want" ] || rc=1

if [ "$rc" = 0 ] && [ -z "${TEST_KEEP:-}" ]; then
	rm -rf "$work"
else
	echo "logs kept in $work"
fi
exit $rc
