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
# RROCE_TIMEOUT_SCALE (multiplies timeouts), RROCE_KMEMLEAK (unset: one
# kmemleak scan after all the scripts, a result of its own; 1: a scan at the
# end of each script; 0: none), RROCE_RESULTS=DIR (per-test logs; default
# build/selftests), RROCE_CLAIMS=DIR (share the tests with other run.sh
# instances given the same DIR, e.g. in other VMs over the host's file
# system: each takes the next test no other instance has claimed yet --
# an O_EXCL create of DIR/NAME -- so every test runs once in all; the TAP
# plan then comes last and counts the tests this instance ran).
set -u
here=$(cd "$(dirname "$0")" && pwd)
dir=$here/rdma

# test_name PATH: its name (basename without .sh; no program started)
test_name() { local n=${1##*/}; echo "${n%.sh}"; }

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
	for f in "${all[@]}"; do test_name "$f"; done
	exit 0
fi

tests=()
if [ "${1:-}" = -x ]; then
	shift
	declare -A except=()
	for a in "$@"; do
		n=$(test_name "$a")
		[ -x "$dir/$n.sh" ] || { echo "no such test: $a (see $0 -l)" >&2; exit 2; }
		except[$n]=1
	done
	for f in "${all[@]}"; do
		[ -n "${except[$(test_name "$f")]:-}" ] || tests+=("$f")
	done
elif [ $# -gt 0 ]; then
	for a in "$@"; do
		n=$(test_name "$a")
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
# (Bash alone here and in the loop below: a program started costs ~0.3 s on
# the debug kernel under TCG, and this runs around every script.)
busy_ticks() {
	local _c u n s _i _w q sq
	read -r _c u n s _i _w q sq _ </proc/stat
	printf -v "$1" %s $((u + n))
	printf -v "$2" %s $((s + q + sq))
}
hz=$(getconf CLK_TCK 2>/dev/null || echo 100)

# kmemleak (debug kernel): one scan after all the scripts instead of one at
# the end of each (RROCE_KMEMLEAK=0 for them).  A scan of the debug VM takes
# ~12 s under TCG, and a suspect's report names its allocation's stack, so
# a leak is still found and placed; RROCE_KMEMLEAK set by the caller keeps
# the per-script scans (1) or none at all (0).
leakscan=0
if [ -z "${RROCE_KMEMLEAK:-}" ] && [ -w /sys/kernel/debug/kmemleak ]; then
	leakscan=1
	export RROCE_KMEMLEAK=0
	echo clear >/sys/kernel/debug/kmemleak 2>/dev/null
fi

# claim NAME: true if this instance may run NAME (always, without RROCE_CLAIMS)
claims=${RROCE_CLAIMS:-}
claim() {
	[ -n "$claims" ] || return 0
	local rc
	set -C
	{ : >"$claims/$1"; } 2>/dev/null
	rc=$?
	set +C
	return $rc
}

passed=0 failed=0 skipped=0
echo "TAP version 13"
[ -n "$claims" ] || echo "1..$((${#tests[@]} + leakscan))"
i=0
for t in "${tests[@]}"; do
	name=$(test_name "$t")
	claim "$name" || continue
	i=$((i + 1))
	log=$results/$name.tap
	echo "# selftests: rdma: $name"
	start=$EPOCHSECONDS
	busy_ticks user0 sys0
	# a script may ask for more time with a "# selftest-timeout=SECONDS" line
	tmo=
	while IFS= read -r l; do
		[[ $l =~ ^#\ selftest-timeout=([0-9]*)$ ]] && { tmo=${BASH_REMATCH[1]}; break; }
	done <"$t"
	tmo=$((${tmo:-$timeout} * ${RROCE_TIMEOUT_SCALE:-1}))
	[ "$tmo" -lt "$timeout" ] && tmo=$timeout
	TEST_NAME=$name RROCE_IN_SUITE=1 timeout --kill-after=10 "$tmo" "$t" </dev/null >"$log" 2>&1
	rc=$?
	# the script's TAP, indented; count its subtests and find its plan
	p=0 s=0 f=0 plan=
	while IFS= read -r l || [ -n "$l" ]; do
		printf '# %s\n' "$l"
		if [[ $l =~ ^ok\ [0-9]+ ]]; then
			if [[ $l =~ ^ok\ [0-9]+\ .*#\ *SKIP ]]; then s=$((s + 1)); else p=$((p + 1)); fi
		elif [[ $l =~ ^not\ ok\ [0-9]+ ]]; then
			f=$((f + 1))
		elif [ -z "$plan" ] && [[ $l =~ ^1\.\.([0-9]*) ]]; then
			plan=${BASH_REMATCH[1]}
		fi
	done <"$log"
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
	took=$((EPOCHSECONDS - start))
	# CPU seconds the guest spent busy (all CPUs) during the script
	busy_ticks user1 sys1
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
if [ $leakscan = 1 ]; then
	i=$((i + 1))
	echo "# selftests: kmemleak (one scan after all the scripts above)"
	start=$(date +%s)
	# shellcheck source=lib.sh
	leaks=$(. "$here/lib.sh" && RROCE_KMEMLEAK=1 kmemleak_scan)
	rc=$?
	took="$(($(date +%s) - start))s"
	if [ $rc != 0 ]; then
		echo "# kmemleak refuses to scan: it turned itself off ('kmemleak:' lines in dmesg): no leak check"
		failed=$((failed + 1))
		echo "not ok $i selftests: kmemleak # no scan (${took})"
	elif [ -n "$leaks" ]; then
		printf '%s\n' "$leaks" | head -200 | sed 's/^/# /'
		failed=$((failed + 1))
		echo "not ok $i selftests: kmemleak # suspected leaks (${took})"
	else
		passed=$((passed + 1))
		echo "ok $i selftests: kmemleak (${took})"
	fi
fi
[ -z "$claims" ] || echo "1..$i"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
