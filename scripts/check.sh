#!/usr/bin/env bash
# `make check`: host tests and the VM selftests.
#
#   scripts/check.sh [plain|debug]   (default plain; `make check-debug`)
#
# Plain flavor (`make check`): host tests; the VM suite on the plain kernel
# except the robustness tests (DEBUG_TESTS below: hostile packets and
# userspace, faults, failslab, limits, kernel consumers...), which run on the
# debug kernel (KASAN, lockdep, kmemleak, UBSAN, failslab), where a memory
# or locking bug becomes a report that check_dmesg turns into a failure.
# Both kernels build in the background from the start, the debug one first
# (see kbuild below); each VM run starts as soon as its kernel and module
# are built, the debug one first, and the host tests run beside them.
# Time bounds (seconds since the start; the CI limit is 90 min):
#   RROCE_CHECK_BUDGET (5100)     everything ends by then
#   RROCE_FALLBACK_SECS (600)     kept at the end for the fallback below
#   RROCE_DEBUG_MIN_SECS (600)    the debug stage starts only with at least
#                                 this much time before the fallback
# The debug stage runs the DEBUG_TESTS in order until they are done or its
# time is up (a script cut midway counts for nothing).  Every robustness
# test the debug stage did not finish — debug kernel not built in time,
# its build failed, the stage was cut — then runs on the plain kernel
# (the fallback), so each runs at least once, and the summary says which
# ran where.  failslab needs the debug kernel: on plain it reports skips.
# RROCE_CHECK_DEBUG=0: no debug stage, everything on the plain kernel.
#
# The plain suite and the debug stage run side by side, in two VMs, the
# plain one with a single vCPU and no lower priority.  Measured 2026-12-06
# on the 2-core machine, cached kernels, the VM stages alone:
#   one after the other (2 vCPUs each)          plain 9.8 + debug 15.4 = 25.2 min
#   side by side, plain 2 vCPUs, niced (before)  29-30 min (the plain VM
#                                                starved, 3x slower; the debug
#                                                one still 1.6x slower)
#   side by side, plain 1 vCPU, not niced        18.8 min (plain done at 11.2,
#                                                the debug stage at 18.8)
# Two TCG VMs slow each other down more than their CPU use says (each
# alone keeps only ~1 of the 2 cores busy, yet side by side the debug VM
# ran 1.6-1.8x slower in both arrangements; not pinned down further, and
# plain with 2 vCPUs not niced was not measured).  The debug stage keeps
# 2 vCPUs: the robustness tests race on them.
# When the plain suite runs alone (a fresh run: its kernel, built at low
# priority beside the debug build and stage, is ready only after the debug
# stage; or with no debug stage), two VMs with one vCPU each share its
# scripts, and a second one joins when the debug stage ends first (see
# try_start_plain).  Not the other way round: tried 2026-12-07 (cached
# run), a second debug VM (2 vCPUs) joining once the plain suite was over
# made the robustness scripts 3-8x slower in both debug VMs
# (disassociate 231 s against 68, kill_reclaim still running after 12 min
# against 88 s): four busy vCPU threads on two cores, likely guest
# spinlocks whose holder the host descheduled (TCG has no paravirtual
# remedy).  The plain VM beside the debug one has 1 vCPU and mostly waits.
# RROCE_CHECK_SERIAL=1: one after the other (debug first), both with 2 vCPUs.
#
# `make check-debug` runs the whole suite on the debug kernel instead
# (5-10x slower than plain under TCG: hours, not for CI).
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
# host_cpu: "BUSY TOTAL" jiffies of all host CPUs so far (busy: not idle or
# iowait), for the closing line's "host CPUs busy N %": how much of the
# machine the run used, i.e. how far work, not waiting, bounds it
host_cpu() {
	local _c u n s i w q sq st
	read -r _c u n s i w q sq st _ </proc/stat
	echo "$((u + n + s + q + sq + st)) $((u + n + s + i + w + q + sq + st))"
}
read -r cpu_busy0 cpu_all0 < <(host_cpu)
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
# Closing lines (what CI shows first): how long each stage took and which
# subtests failed, by script.
stages=()
failures=()
note_failures() { # note_failures LOG: remember "script: not ok N - ..." lines
	local l
	[ -f "$1" ] || return 0
	# The subtest's own "FAIL: why" lines (up to 3) follow it, so that a
	# summary cut from a long log still says why.
	while IFS= read -r l; do failures+=("$l"); done < <(awk '
		/^# +ok [0-9]+/ { nwhy = 0; next }
		/^# +# FAIL: / { if (nwhy < 3) { sub(/^# +# /, ""); why[++nwhy] = substr($0, 1, 400) }; next }
		/^# +not ok [0-9]+/ {
			sub(/^# +/, ""); bad[++n] = substr($0, 1, 110)
			for (i = 1; i <= nwhy; i++) bad[n] = bad[n] " <- " why[i]
			nwhy = 0; next
		}
		/^(not )?ok [0-9]+ selftests: rdma: / {
			name = $0; sub(/.*selftests: rdma: /, "", name); sub(/ .*/, "", name)
			if ($1 == "not" && n == 0) bad[++n] = substr($0, 1, 110)
			for (i = 1; i <= n; i++) print name ": " bad[i]
			n = 0
		}
		/^not ok/ && !/selftests: rdma: / { print FILENAME ": " substr($0, 1, 110) }
	' "$1")
}

# Robustness tests, run on the debug kernel (most telling first; failslab,
# which runs only there, last).
DEBUG_TESTS=(hostile_packets rx_frags hostile_user memcg faults kill_reclaim disassociate limits kverbs rdma_cm ud_errors mw srq mcast xrc failslab)
# rroce's module parameters in the debug stage (RROCE_DEBUG_KO_ARGS; see
# try_start_debug)
dbg_ko_args=${RROCE_DEBUG_KO_ARGS-icrc=crypto}
budget_end=$((t0 + ${RROCE_CHECK_BUDGET:-5100}))
debug_end=$((budget_end - ${RROCE_FALLBACK_SECS:-600}))
wait_deadline=$((debug_end - ${RROCE_DEBUG_MIN_SECS:-600}))
serial=${RROCE_CHECK_SERIAL:-0}
debug_stage=0
[ "$flavor" = plain ] && [ "${RROCE_CHECK_DEBUG:-1}" = 1 ] && debug_stage=1
since() { # since [T]: "XmYs" from the start of make check to T (default now)
	local s=$((${1:-$(date +%s)} - t0))
	echo "$((s / 60))m$((s % 60))s"
}

# Both kernels build in the background from the start, each in its own
# session (its own process group, so that a build that cannot finish in
# time can be stopped as a whole -- make leaves no half-written objects
# and resumes on the next run -- and its own autogroup).  The exit status
# lands in build/kernel-FLAVOR.rc: "still running" must not be judged by a
# pid, which may be reused during a long run.
#
# The debug stage is the longest chain of a run (its kernel, then ~15 min
# of robustness tests on it), so the debug kernel builds at normal
# priority and the plain one at nice 19 -- for its session's autogroup
# too: with sched_autogroup (on in Debian's kernels) each session is a
# scheduling group and a nice value only ranks tasks within it, so nice
# alone would leave the two builds sharing the CPU equally.  The plain
# build takes what the debug build and, later, the debug VM leave idle
# (tried: the plain build back at nice 0 once the debug VM runs, as the
# plain suite is then the longer chain of a fresh run; the plain kernel
# was ready 50 s sooner, but the robustness tests beside the build took
# up to twice as long: kill_reclaim 103 s against 47, limits 62 against
# 29, hostile_packets 178 against 80).
# On a fresh machine (no ~/.cache/rroce) the debug kernel is then ready
# after about the time it takes alone (7.7 min into a fresh run on
# 2026-12-06, against 17-24 min side by side); cached, both are ready at
# once.
kbuild() { # kbuild FLAVOR NICE: scripts/kernel.sh FLAVOR in the background ($! is its session)
	rm -f "build/kernel-$1.rc"
	setsid bash -c 'echo "$3" >/proc/self/autogroup 2>/dev/null; nice -n "$3" "$1" "$2"; echo $? >"$4"' \
		_ "$here/kernel.sh" "$1" "$2" "$RROCE_TOP/build/kernel-$1.rc" >"build/kernel-$1.log" 2>&1 &
}
dbg_kpid= plain_kpid= dbg_vm_pid=
plain_vm_pids=() plain_logs=()
if [ $debug_stage = 1 ]; then
	kbuild debug 0
	dbg_kpid=$!
	kbuild "$flavor" 19
else
	kbuild "$flavor" 0
fi
plain_kpid=$!
stop_all() {
	local p
	for p in "$dbg_kpid" "$plain_kpid" "$dbg_vm_pid" "${plain_vm_pids[@]}"; do
		[ -z "$p" ] || kill -TERM -- "-$p" 2>/dev/null
	done
}
trap stop_all EXIT
kernel_done() { [ -f "build/kernel-$1.rc" ]; } # its build ended (check the rc file for how)
kernel_ok() { [ "$(cat "build/kernel-$1.rc" 2>/dev/null)" = 0 ]; }

# What both VMs need: the provider and the selftests' C programs (built
# here rather than by each VM under TCG: the guests' c_prog/mpi_prog find
# them up to date; 15-20 s each there).
common=1
"$here/provider.sh" || { common=0; fail=$((fail + 1)); echo "not ok: provider build"; failures+=("provider build"); }
bash -c '. selftests/lib.sh && c_prog hostile_user >/dev/null && mpi_prog mpi_pingpong >/dev/null' ||
	echo "warning: the selftests' C programs did not build on the host; the VMs try again"

finished_scripts() { # finished_scripts LOG: the names of the scripts run.sh finished in LOG
	sed -nE 's/^(not )?ok [0-9]+ selftests: rdma: ([a-z0-9_]+).*/\2/p' "$1"
}
# count_cut LOG WHAT N: count LOG like `count`, but if its run was cut by
# the time limit (no closing count line), count the subtests of the
# scripts that finished -- the one cut midway counts for nothing -- and
# say how far it got (the scripts not run are listed in the closing lines).
count_cut() {
	local log=$1 what=$2 n=$3 last p s f
	if grep -qE '^[0-9]+ passed, [0-9]+ failed' "$log"; then
		count "$log"
		return
	fi
	last=$(grep -nE '^(not )?ok [0-9]+ selftests: ' "$log" | tail -1 | cut -d: -f1)
	if [ -n "$last" ]; then
		head -n "$last" "$log" >"$log.done"
		p=$(grep -cE '^# ok [0-9]+ ' "$log.done")
		s=$(grep -cE '^# ok [0-9]+ .*# *SKIP' "$log.done")
		f=$(grep -cE '^# not ok [0-9]+ ' "$log.done")
		f=$((f + $(grep -cE '^not ok [0-9]+ selftests: .*# (timed out|exited|ran|printed)' "$log.done")))
		pass=$((pass + p - s)) fail=$((fail + f))
	fi
	echo "$what cut by its time limit after $(finished_scripts "$log" | wc -l) of $n scripts"
	cut_notes+=("$what cut by the time limit after $(finished_scripts "$log" | wc -l) of $n scripts")
}
cut_notes=()
# follow_vm PID LOG WHAT: print LOG as it grows until the VM job PID ends
follow_vm() {
	step "$3: its log"
	tail -n +1 -f --pid="$1" "$2"
	wait "$1"
	done_step
}
time_left() { # seconds left until the budget's end, at least 60 (0 = no limit for make check-debug)
	local l=$((budget_end - $(date +%s)))
	if [ "$flavor" = debug ]; then echo 0; elif [ $l -lt 60 ]; then echo 60; else echo $l; fi
}
plain_vm() { # plain_vm LOGNAME TIMEOUT run.sh-ARGS...: in the foreground
	local log=build/$1.log tmo=$2
	shift 2
	RROCE_KO=$RROCE_TOP/build/$flavor/rroce.ko RROCE_KVERBS_KO=$RROCE_TOP/build/$flavor/kmod/rroce_kverbs_test.ko \
		timeout --kill-after=30 "$tmo" "$here/vm" --kernel "$flavor" selftests/run.sh "$@" 2>&1 | tee "$log"
}

# The two VM runs.  Each starts as soon as its kernel is built (the debug
# one first when both are) and runs in the background in its own session
# (so that the EXIT trap can stop its VM); its log is printed when make
# check waits for it.  The plain VM gets one vCPU while the debug stage
# runs beside it (see the top of this file), the debug VM keeps two: the
# robustness tests race on them.
dbg_state=wait plain_state=wait # wait, running, done, skip (debug) / failed (plain)
why=
built=$common
debug_skip() { # debug_skip WHY: no debug stage this run
	dbg_state=skip why=$1
	# the plain build need not yield any more (lowering a nice value back
	# needs privilege: without it, the plain build just stays slower)
	[ -z "$plain_kpid" ] || echo 0 >"/proc/$plain_kpid/autogroup" 2>/dev/null
	stages+=("debug stage skipped at $(since)")
}
try_start_debug() {
	local now
	[ "$dbg_state" = wait ] && kernel_done debug || return 0
	wait "$dbg_kpid" 2>/dev/null
	dbg_kpid=
	if ! kernel_ok debug; then
		fail=$((fail + 1))
		echo "not ok: debug kernel build"
		tail -20 build/kernel-debug.log
		debug_skip "debug kernel build failed (build/kernel-debug.log)"
		return 0
	fi
	stages+=("debug kernel ready at $(since)")
	if [ $common = 0 ]; then
		debug_skip "the provider did not build"
		return 0
	fi
	# (the CLIPPY=1 lint build is the plain flavor's: the same sources)
	if ! { RROCE_MODULE_CLIPPY=0 "$here/module.sh" debug && "$here/kmod.sh" debug; }; then
		fail=$((fail + 1))
		echo "not ok: module build (debug)"
		debug_skip "module build (debug) failed"
		return 0
	fi
	now=$(date +%s)
	if [ "$now" -ge "$wait_deadline" ]; then
		debug_skip "no time left for it ($(((now - t0) / 60)) min into make check)"
		return 0
	fi
	# rroce's ICRC there through the crypto API (crc32-pclmul, in softirq
	# and wherever packets are built, under KASAN and lockdep); the plain
	# suite has icrc=auto, the table under TCG: both run in every make check
	step "robustness tests on the debug kernel (rroce ${dbg_ko_args:-without parameters}), in the background from $(since): ${DEBUG_TESTS[*]}"
	rm -f build/selftests-debug.end
	: >build/selftests-debug.log
	setsid bash -c '"$@" >build/selftests-debug.log 2>&1; date +%s >build/selftests-debug.end' _ \
		env RROCE_KO="$RROCE_TOP/build/debug/rroce.ko" RROCE_KVERBS_KO="$RROCE_TOP/build/debug/kmod/rroce_kverbs_test.ko" \
		RROCE_TIMEOUT_SCALE="${RROCE_TIMEOUT_SCALE:-4}" RROCE_RESULTS="$RROCE_TOP/build/selftests-debug" RROCE_KO_ARGS="$dbg_ko_args" \
		timeout --kill-after=30 $((debug_end - now)) "$here/vm" --kernel debug selftests/run.sh "${DEBUG_TESTS[@]}" &
	dbg_vm_pid=$!
	dbg_t0=$now dbg_state=running
	done_step
}
# debug_vm_running: the debug VM has not ended (its job ends before
# finish_debug marks the stage done)
debug_vm_running() {
	[ "$dbg_state" = wait ] || { [ "$dbg_state" = running ] && [ ! -f build/selftests-debug.end ]; }
}
plain_args=() plain_cpus=() plain_claims=
plain_vm_add() { # one more plain VM in the background (build/selftests[-N].log)
	local log=build/selftests.log
	[ ${#plain_logs[@]} = 0 ] || log=build/selftests-$((${#plain_logs[@]} + 1)).log
	plain_logs+=("$log")
	rm -f "${log%.log}.end"
	: >"$log"
	setsid bash -c 'log=$1; shift; "$@" >"$log" 2>&1; date +%s >"${log%.log}.end"' _ "$log" \
		env RROCE_KO="$RROCE_TOP/build/$flavor/rroce.ko" RROCE_KVERBS_KO="$RROCE_TOP/build/$flavor/kmod/rroce_kverbs_test.ko" \
		RROCE_CLAIMS="$plain_claims" \
		timeout --kill-after=30 "$(time_left)" "$here/vm" "${plain_cpus[@]}" --kernel "$flavor" selftests/run.sh "${plain_args[@]}" &
	plain_vm_pids+=($!)
}
# plain_vm_join: when the debug VM has ended and a lone plain VM still has
# at least 4 scripts nobody took (a VM's boot is worth it), a second one
# joins it
plain_vm_join() {
	local n
	[ "$plain_state" = running ] && [ ${#plain_vm_pids[@]} = 1 ] && [ -n "$plain_claims" ] || return 0
	[ ! -f build/selftests.end ] && ! debug_vm_running || return 0
	n=$(selftests/run.sh -l | wc -l)
	[ $debug_stage = 0 ] || n=$((n - ${#DEBUG_TESTS[@]}))
	[ $((n - $(find "$plain_claims" -type f | wc -l))) -ge 4 ] || return 0
	stages+=("a second plain VM joined at $(since)")
	plain_vm_add
}
try_start_plain() {
	[ "$plain_state" = wait ] && kernel_done "$flavor" || return 0
	[ "$serial" = 1 ] && [[ $dbg_state == @(wait|running) ]] && return 0
	wait "$plain_kpid" 2>/dev/null
	plain_kpid=
	if ! kernel_ok "$flavor"; then
		tail -20 "build/kernel-$flavor.log"
		built=0
	fi
	stages+=("$flavor kernel ready at $(since)")
	[ $built = 1 ] && "$here/module.sh" "$flavor" || { built=0; fail=$((fail + 1)); echo "not ok: kernel or module build ($flavor)"; }
	# without its module the kverbs selftest skips; the others still run
	[ $built = 0 ] || "$here/kmod.sh" "$flavor" || { fail=$((fail + 1)); echo "not ok: kverbs test module build ($flavor)"; }
	if [ $built = 0 ]; then
		failures+=("kernel, module or provider build ($flavor)")
		plain_state=failed
		return 0
	fi
	[ $debug_stage = 0 ] || plain_args=(-x "${DEBUG_TESTS[@]}")
	# Beside the debug stage: one VM with one vCPU.  Alone (the debug
	# stage over, skipped, or not run): two VMs with one vCPU each share the
	# scripts (RROCE_CLAIMS), as one VM keeps only ~1 core busy: the plain
	# scripts mostly wait (peers, timers, TCG's slow clocks), they do not
	# compute.  Measured 2026-12-06, one after the other: 249 s against
	# 431 s in one VM with two vCPUs.  A second VM also joins when the
	# debug stage ends before the plain suite (plain_vm_join).
	# RROCE_CHECK_SERIAL: one VM with two vCPUs.
	local vms=1
	plain_claims=
	if [ "$serial" != 1 ]; then
		plain_cpus=(--cpus 1)
		plain_claims=$RROCE_TOP/build/selftests-claims
		rm -rf "$plain_claims"
		mkdir -p "$plain_claims"
		debug_vm_running || vms=2
	fi
	step "VM selftests ($flavor kernel${plain_args:+, all but the robustness tests}$([ $vms = 1 ] || echo ", shared by two VMs")), in the background from $(since)"
	plain_t0=$(date +%s)
	plain_logs=()
	plain_vm_add
	[ $vms = 1 ] || plain_vm_add
	plain_state=running
	done_step
}
# give_up_debug_build: true when the debug kernel cannot be ready in time
# (the deadline passed, or its recent pace needs more than twice the time
# left; objects still to build are counted against about 1,600, the debug
# build's size on 2026-12-06, or the plain build's, if larger)
dbg_prev_t=$(date +%s) dbg_prev_n=$(find "$RROCE_CACHE/build-debug" -name '*.o' 2>/dev/null | wc -l)
give_up_debug_build() {
	local now n total left rate_n rate_t
	now=$(date +%s)
	[ "$now" -lt "$wait_deadline" ] || return 0
	n=$(find "$RROCE_CACHE/build-debug" -name '*.o' 2>/dev/null | wc -l)
	total=$(find "$RROCE_CACHE/build-plain" -name '*.o' 2>/dev/null | wc -l)
	[ "$total" -ge 1600 ] || total=1600
	left=$((total > n ? total - n : 0))
	rate_n=$((n - dbg_prev_n)) rate_t=$((now - dbg_prev_t))
	[ "$rate_t" -ge 120 ] && [ $((2 * (wait_deadline - now) * rate_n)) -lt $((left * rate_t)) ] && return 0
	if [ "$rate_t" -ge 300 ]; then dbg_prev_t=$now dbg_prev_n=$n; fi
	return 1
}

on_debug=()
finish_debug() { # wait for the debug VM (printing its log) and count it
	local end
	follow_vm "$dbg_vm_pid" build/selftests-debug.log "robustness tests on the debug kernel"
	dbg_vm_pid=
	plain_vm_join
	count_cut build/selftests-debug.log "debug stage" ${#DEBUG_TESTS[@]}
	mapfile -t on_debug < <(finished_scripts build/selftests-debug.log)
	note_failures build/selftests-debug.log
	end=$(cat build/selftests-debug.end 2>/dev/null || date +%s)
	stages+=("robustness tests (debug) $(((end - dbg_t0) / 60))m$(((end - dbg_t0) % 60))s, done at $(since "$end")")
	dbg_state=done
}
finish_plain() { # the same for the plain VM(s)
	local end=0 e i n=${#plain_logs[@]}
	for i in "${!plain_logs[@]}"; do
		follow_vm "${plain_vm_pids[$i]}" "${plain_logs[$i]}" "VM selftests ($flavor kernel$([ "$n" = 1 ] || echo ", VM $((i + 1)) of $n"))"
		count "${plain_logs[$i]}"
		note_failures "${plain_logs[$i]}"
		e=$(cat "${plain_logs[$i]%.log}.end" 2>/dev/null || date +%s)
		[ "$e" -le "$end" ] || end=$e
	done
	plain_vm_pids=()
	stages+=("VM selftests ($flavor$([ "$n" = 1 ] || echo ", $n VMs")) $(((end - plain_t0) / 60))m$(((end - plain_t0) % 60))s, done at $(since "$end")")
	plain_state=done
}

[ $debug_stage = 1 ] || dbg_state=skip
# A cached kernel is "built" within seconds: then the debug VM starts
# before the host tests, which run beside it.
for _ in 1 2 3 4 5 6 7 8 9 10; do
	[ $debug_stage = 1 ] && ! kernel_done debug || break
	sleep 1
done
try_start_debug
# The host tests run beside the kernel builds or the first VM.
"$here/host-test.sh" 2>&1 | tee build/host-test.log
count build/host-test.log
grep -qE '^host: [0-9]+ passed, 0 failed' build/host-test.log || failures+=("host tests: $(grep -E 'passed, [0-9]+ failed' build/host-test.log | tail -1)")
stages+=("host tests done at $(since)")
[ $common = 1 ] || plain_state=failed
while :; do
	try_start_debug
	try_start_plain
	[ "$dbg_state" != wait ] && [ "$plain_state" != wait ] && break
	# one after the other: the plain VM waits for the debug one to end
	if [ "$serial" = 1 ] && [ "$dbg_state" = running ]; then
		finish_debug
		continue
	fi
	if [ "$dbg_state" = wait ] && ! kernel_done debug && give_up_debug_build; then
		n=$(find "$RROCE_CACHE/build-debug" -name '*.o' 2>/dev/null | wc -l)
		kill -TERM -- "-$dbg_kpid" 2>/dev/null
		wait "$dbg_kpid" 2>/dev/null
		dbg_kpid=
		debug_skip "debug kernel build not finished in time ($n objects built, $(((($(date +%s)) - t0) / 60)) min into make check; it resumes on the next run)"
	fi
	if [ "$plain_state" = wait ] && [ "$(date +%s)" -ge $((budget_end - 120)) ]; then
		kill -TERM -- "-$plain_kpid" 2>/dev/null
		echo "not ok: $flavor kernel not built within the time limit"
		fail=$((fail + 1)) built=0 plain_state=failed
		failures+=("$flavor kernel not built within the time limit")
	fi
	sleep 5
done

[ "$dbg_state" != running ] || finish_debug
[ $debug_stage = 0 ] || [ "$dbg_state" != skip ] || echo "ok - debug-kernel stage # SKIP $why"
[ "$plain_state" != running ] || finish_plain

fallback=() on_fallback=()
ran_on_debug() { [[ " ${on_debug[*]} " == *" $1 "* ]]; }
if [ $debug_stage = 1 ]; then
	for t in "${DEBUG_TESTS[@]}"; do
		ran_on_debug "$t" || [ "$t" = failslab ] || fallback+=("$t")
	done
	if [ ${#fallback[@]} -gt 0 ] && [ "$plain_state" = done ]; then
		step "robustness tests the debug stage did not run, on the plain kernel: ${fallback[*]}"
		plain_vm selftests-fallback "$(time_left)" "${fallback[@]}"
		count_cut build/selftests-fallback.log "fallback" ${#fallback[@]}
		mapfile -t on_fallback < <(finished_scripts build/selftests-fallback.log)
		note_failures build/selftests-fallback.log
		stages+=("fallback on plain done at $(since)")
		done_step
	fi
fi
read -r cpu_busy1 cpu_all1 < <(host_cpu)
stages+=("host CPUs busy $((100 * (cpu_busy1 - cpu_busy0) / (cpu_all1 - cpu_all0 + 1))) %")
echo "check took $(($(date +%s) - t0))s: ${stages[*]/%/,}"
for f in "${failures[@]}"; do echo "FAILED $f"; done
if [ $debug_stage = 1 ]; then
	echo "robustness tests on the debug kernel: ${on_debug[*]:-none}"
	echo "robustness tests on the plain kernel instead: ${fallback[*]:-none}"
	for t in "${fallback[@]}"; do
		[[ " ${on_fallback[*]} " == *" $t "* ]] || echo "not run: $t (no plain kernel, or the time limit cut the fallback) # SKIP"
	done
	for c in "${cut_notes[@]}"; do echo "$c"; done
	ran_on_debug failslab || echo "not run: failslab (needs the debug kernel)"
	n_dbg=0
	for t in "${DEBUG_TESTS[@]}"; do ran_on_debug "$t" && n_dbg=$((n_dbg + 1)); done
	echo "debug stage: $n_dbg of ${#DEBUG_TESTS[@]} robustness scripts ran on the debug kernel, $((${#DEBUG_TESTS[@]} - n_dbg)) skipped there"
fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
