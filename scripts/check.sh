#!/usr/bin/env bash
# `make check`: host tests, then the VM selftests on the debug kernel.
# The last line is "N passed, N failed"; the exit status is non-zero on any
# failure.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
cd "$RROCE_TOP"
t0=$(date +%s)
pass=0 fail=0
count() { # parse "... N passed, N failed" from the last such line of a log
	local line
	line=$(grep -E '[0-9]+ passed, [0-9]+ failed' "$1" | tail -1)
	if [ -z "$line" ]; then
		fail=$((fail + 1))
		return
	fi
	pass=$((pass + $(sed -E 's/.*\b([0-9]+) passed.*/\1/' <<<"$line")))
	fail=$((fail + $(sed -E 's/.*\b([0-9]+) failed.*/\1/' <<<"$line")))
}
mkdir -p build
"$here/host-test.sh" 2>&1 | tee build/host-test.log
count build/host-test.log

built=1
"$here/module.sh" debug || { built=0; fail=$((fail + 1)); echo "not ok: module build (debug)"; }
"$here/provider.sh" || { built=0; fail=$((fail + 1)); echo "not ok: provider build"; }
if [ $built = 1 ]; then
	step "VM selftests (debug kernel)"
	RROCE_KO=$RROCE_TOP/build/debug/rroce.ko "$here/vm" --kernel debug selftests/run.sh 2>&1 | tee build/selftests.log
	count build/selftests.log
	done_step
fi
echo "check took $(($(date +%s) - t0))s"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
