#!/usr/bin/env bash
# Run the rroce selftests (kselftest style) and print TAP.
#
#   selftests/run.sh              run every test in selftests/rdma/
#   selftests/run.sh NAME...      run only these (link_add_del, link_add_del.sh
#                                 or selftests/rdma/link_add_del.sh)
#   selftests/run.sh -l           list the tests
#   selftests/run.sh -x NAME...   run every test except these
#
# Meant to run as root inside the test VM:
#   scripts/vm --kernel debug selftests/run.sh
#
# Output: TAP version 13 with one result per test script (kselftest runner
# style); each script's own TAP is indented with "# ".  The very last line
# counts the individual subtests of all scripts:
#   N passed, N failed, N skipped
# (skips are not passes).  A script that times out, exits with a failure
# code without printing a "not ok", or prints fewer results than planned
# adds one failure.  Exit status: 0 if nothing failed, 1 otherwise.
#
# Environment: RROCE_TYPE=rroce|rxe (driver under test, default rroce),
# RROCE_TIMEOUT_SCALE (multiplies timeouts), RROCE_KMEMLEAK=0 (no kmemleak
# scans), RROCE_RESULTS=DIR (per-test logs; default build/selftests).
set -u
here=$(cd "$(dirname "$0")" && pwd)
dir=$here/rdma

timeout=45
if [ -f "$dir/settings" ]; then
	t=$(sed -n 's/^timeout=//p' "$dir/settings")
	[ -n "$t" ] && timeout=$t
fi
timeout=$((timeout * ${RROCE_TIMEOUT_SCALE:-1}))

all=()
for f in "$dir"/*.sh; do
	[ -x "$f" ] && all+=("$f")
done

if [ "${1:-}" = -l ]; then
	for f in "${all[@]}"; do basename "$f" .sh; done
	exit 0
fi

tests=()
if [ "${1:-}" = -x ]; then
	shift
	declare -A except=()
	for a in "$@"; do
		n=$(basename "$a" .sh)
		[ -x "$dir/$n.sh" ] || { echo "no such test: $a (see $0 -l)" >&2; exit 2; }
		except[$n]=1
	done
	for f in "${all[@]}"; do
		[ -n "${except[$(basename "$f" .sh)]:-}" ] || tests+=("$f")
	done
elif [ $# -gt 0 ]; then
	for a in "$@"; do
		n=$(basename "$a" .sh)
		[ -x "$dir/$n.sh" ] || { echo "no such test: $a (see $0 -l)" >&2; exit 2; }
		tests+=("$dir/$n.sh")
	done
else
	tests=("${all[@]}")
fi

results=${RROCE_RESULTS:-$here/../build/selftests}
mkdir -p "$results" 2>/dev/null || results=$(mktemp -d)

# busy_ticks: the guest's CPU time so far, all CPUs, in USER_HZ ticks:
# "USER KERNEL" (user + nice; system + irq + softirq), to say how busy a
# script kept the guest and where.
busy_ticks() { awk '/^cpu /{ print $2 + $3, $4 + $7 + $8; exit }' /proc/stat; }
hz=$(getconf CLK_TCK 2>/dev/null || echo 100)

passed=0 failed=0 skipped=0
echo "TAP version 13"
echo "1..${#tests[@]}"
i=0
for t in "${tests[@]}"; do
	i=$((i + 1))
	name=$(basename "$t" .sh)
	log=$results/$name.tap
	echo "# selftests: rdma: $name"
	start=$(date +%s)
	read -r user0 sys0 < <(busy_ticks)
	# a script may ask for more time with a "# selftest-timeout=SECONDS" line
	tmo=$(sed -n 's/^# selftest-timeout=\([0-9]*\)$/\1/p' "$t" | head -1)
	tmo=$((${tmo:-$timeout} * ${RROCE_TIMEOUT_SCALE:-1}))
	[ "$tmo" -lt "$timeout" ] && tmo=$timeout
	TEST_NAME=$name RROCE_IN_SUITE=1 timeout --kill-after=10 "$tmo" "$t" </dev/null >"$log" 2>&1
	rc=$?
	sed 's/^/# /' "$log"
	# count subtests
	p=$(grep -cE '^ok [0-9]+' "$log")
	s=$(grep -cE '^ok [0-9]+ .*# *SKIP' "$log")
	f=$(grep -cE '^not ok [0-9]+' "$log")
	p=$((p - s))
	plan=$(sed -n 's/^1\.\.\([0-9]*\).*/\1/p' "$log" | head -1)
	extra=
	if [ $rc = 124 ] || [ $rc = 137 ]; then
		extra="timed out after ${tmo}s"
	elif [ $rc != 0 ] && [ $rc != 4 ] && [ "$f" = 0 ]; then
		extra="exited $rc without a failing subtest"
	elif [ -n "$plan" ] && [ $((p + s + f)) -lt "$plan" ]; then
		extra="ran $((p + s + f)) of $plan planned subtests"
	elif [ -z "$plan" ]; then
		extra="printed no TAP plan"
	fi
	[ -n "$extra" ] && f=$((f + 1))
	passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
	took=$(($(date +%s) - start))
	# CPU seconds the guest spent busy (all CPUs) during the script
	read -r user1 sys1 < <(busy_ticks)
	took="${took}s, cpu $(((user1 - user0 + sys1 - sys0) / hz))s: user $(((user1 - user0) / hz))s, kernel $(((sys1 - sys0) / hz))s"
	if [ -n "$extra" ]; then
		echo "not ok $i selftests: rdma: $name # $extra (${took})"
	elif [ $rc = 4 ]; then
		echo "ok $i selftests: rdma: $name # SKIP (${took})"
	elif [ $rc = 0 ] && [ "$f" = 0 ]; then
		echo "ok $i selftests: rdma: $name (${took})"
	else
		echo "not ok $i selftests: rdma: $name # exit=$rc (${took})"
	fi
done
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
