#!/usr/bin/env bash
# `make check`: host tests, then the VM selftests.
#
#   scripts/check.sh [plain|debug]   (default plain; `make check-debug`)
#
# The plain kernel runs the whole suite in about half an hour under TCG; the
# debug kernel (KASAN, lockdep, kmemleak, UBSAN) is 5-10x slower, too slow
# for the 90-minute CI budget, and is run by hand (`make check-debug`).
# The last line is "N passed, N failed"; the exit status is non-zero on any
# failure.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
cd "$RROCE_TOP"
flavor=${1:-plain}
case $flavor in plain | debug) ;; *) die "flavor must be plain or debug, not '$flavor'" ;; esac
export RROCE_KERNEL_FLAVOR=$flavor
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
"$here/module.sh" "$flavor" || { built=0; fail=$((fail + 1)); echo "not ok: module build ($flavor)"; }
"$here/provider.sh" || { built=0; fail=$((fail + 1)); echo "not ok: provider build"; }
# without its module the kverbs selftest skips; the others still run
"$here/kmod.sh" "$flavor" || { fail=$((fail + 1)); echo "not ok: kverbs test module build ($flavor)"; }
if [ $built = 1 ]; then
	step "VM selftests ($flavor kernel)"
	RROCE_KO=$RROCE_TOP/build/$flavor/rroce.ko RROCE_KVERBS_KO=$RROCE_TOP/build/$flavor/kmod/rroce_kverbs_test.ko \
		"$here/vm" --kernel "$flavor" selftests/run.sh 2>&1 | tee build/selftests.log
	count build/selftests.log
	done_step
fi
echo "check took $(($(date +%s) - t0))s"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
