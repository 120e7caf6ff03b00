#!/usr/bin/env bash
# Slab allocation failures (kernel fault injection, debug kernel only:
# CONFIG_FAILSLAB, CONFIG_FAULT_INJECTION_DEBUG_FS; on other kernels every
# subtest is skipped with that reason).  failslab is set to fail
# GFP_KERNEL allocations too (ignore-gfp-wait N) and to log nothing
# (verbose 0); the settings are restored at the end.
#   1-8  py/failslab_verbs.py, one verb each (open device/alloc_ucontext,
#        alloc_pd, create_cq, create_qp, reg_mr 64 KiB, create_srq,
#        create_ah, modify_qp RESET->INIT->RTR->RTS): the n-th slab
#        allocation of the calling thread fails (/proc/thread-self/
#        fail-nth) for n = 1, 2, ... until the verb makes fewer than n
#        allocations; each call fails with ENOMEM or succeeds, `rdma res
#        show` is unchanged after the sweep, the verb works afterwards
#   9    `rdma link add` with task-filtered random failures
#        (task-filter Y, probability 1-20 %, py/nl_link_add.py sends the
#        netlink request with only itself marked in make-it-fail, once
#        loaded: the VM's 9p root does not survive allocation failures
#        in exec or file I/O; one process, as a coprocess, makes all 30
#        attempts): each attempt either fails and leaves no
#        device, or succeeds with an ACTIVE device that deletes cleanly;
#        afterwards link add works and no UDP socket was leaked
#   10   1 % of atomic slab allocations fail system-wide during an RC
#        transfer (skbs of the data path; from when the QPs are in RTS):
#        data verified, transfer completes (retransmits cover the lost
#        packets)
#   11   a fresh RC transfer works
# kmemleak must find nothing (run.sh scans after the last script,
# check_dmesg with RROCE_KMEMLEAK=1).
# selftest-timeout=1800
# shellcheck source-path=SCRIPTDIR source=../lib.sh
. "$(dirname "$0")/../lib.sh"

OPS=${FAILSLAB_OPS-ctx pd cq qp mr srq ah qp_rts}

# check_dmesg of lib.sh, except that the reports the kernel prints for an
# injected allocation failure itself (warn_alloc: "vmalloc error: ...",
# "page allocation failure: ..." with a stack dump up to </TASK>) are
# expected here and cut out before looking for splats.
check_dmesg() {
	local log leaks n off
	t_begin "no kernel warnings, splats or leaks in dmesg (beyond the reports of the injected failures)"
	leaks=$(kmemleak_scan) || t_fail "kmemleak refuses to scan (it turned itself off: 'kmemleak:' lines in dmesg); no leak check"
	n=$(dmesg_since_mark | grep -cE '(allocation failure|vmalloc error):')
	[ "$n" != 0 ] && diag "$n allocation-failure reports of injected failures (expected, not counted)"
	log=$(dmesg_since_mark | awk '/(allocation failure|vmalloc error):/ { skip = 1 } skip && /<\/TASK>/ { skip = 0; next } !skip')
	if printf '%s\n' "$log" | grep -Eq "$DMESG_BAD"; then
		t_fail "kernel log has a report:"
		printf '%s\n' "$log" | grep -En -A30 "$DMESG_BAD" | head -60 | sed 's/^/#   /'
	fi
	if [ -n "$leaks" ]; then
		t_fail "kmemleak suspects leaks:"
		printf '%s\n' "$leaks" | head -60 | sed 's/^/#   /'
	fi
	off=$(kernel_checks_off)
	[ -z "$off" ] || t_fail "kernel checks were off: $off"
	t_end
}
test_init 12
rc_xfer_setup

FS=/sys/kernel/debug/failslab
why=
if [ ! -d "$FS" ] || [ ! -e /proc/thread-self/fail-nth ]; then
	why="no $FS or /proc/thread-self/fail-nth (needs CONFIG_FAILSLAB and CONFIG_FAULT_INJECTION_DEBUG_FS: the debug kernel)"
fi
[ -z "$why" ] && why=$(provider_unavailable)
if [ -n "$why" ]; then
	while [ "$_t_num" -lt $((_t_plan - 1)) ]; do ktap_skip "$TEST_NAME" "$why"; done
	test_done
fi

declare -A saved
FS_KNOBS="probability interval times space verbose task-filter ignore-gfp-wait"
for k in $FS_KNOBS; do saved[$k]=$(cat "$FS/$k"); done
fs_restore() {
	local k
	echo 0 >"$FS/probability"
	for k in $FS_KNOBS; do echo "${saved[$k]}" >"$FS/$k" 2>/dev/null; done
}
trap 'fs_restore; rdma link delete rroce_fs 2>/dev/null; ip link del rrfs0 2>/dev/null' EXIT
echo 0 >"$FS/probability"
echo 0 >"$FS/verbose"
echo N >"$FS/ignore-gfp-wait"
echo 1 >"$FS/interval"
echo 0 >"$FS/space"

# 1-8, one Python process
cases=()
for op in $OPS; do
	cases+=("$op|failslab in $op on $DEV0: every allocation failure point -> ENOMEM or success, nothing leaked")
done
tmo=$((600 * ${RROCE_TIMEOUT_SCALE:-1}))
PY_CHECKS_TMO=$tmo py_cases failslab_verbs.py "$DEV0" "$RC_G0" --limit "$tmo" -- "${cases[@]}"

# 9
t_begin "rdma link add under random task-filtered failslab: fails cleanly or works"
base_udp=$(udp4791)
ip link del rrfs0 2>/dev/null
if ! ip link add rrfs0 type veth peer name rrfs1 || ! ip link set rrfs0 up || ! ip link set rrfs1 up; then
	t_fail "cannot make the veth pair rrfs0/rrfs1"
else
	echo Y >"$FS/task-filter"
	echo -1 >"$FS/times"
	nok=0 nfail=0 nunknown=0 msgs=
	# one Python process for all 30 requests (a coprocess: a request per
	# line in, the answer line out); a dead one fails the subtest, not the
	# script (SIGPIPE ignored meanwhile)
	coproc NL { exec /usr/bin/python3 "$RROCE_REPO/selftests/py/nl_link_add.py" --serve --make-it-fail 2>&1; }
	trap '' PIPE
	for pct in 1 2 5 10 20; do
		echo "$pct" >"$FS/probability"
		for _ in 1 2 3 4 5 6; do
			out= rc=
			if echo "rroce_fs rroce rrfs0" 2>/dev/null >&"${NL[1]:-}" &&
				read -r -t $((120 * ${RROCE_TIMEOUT_SCALE:-1})) out <&"${NL[0]}"; then
				case $out in ok) rc=0 ;; "error "*) rc=1 ;; "unknown "*) rc=3 ;; esac
			fi
			if [ -z "$rc" ]; then
				t_fail "nl_link_add.py --serve gave no answer or an unexpected one at $pct %: '$out'"
				break 2
			fi
			if [ $rc = 3 ]; then
				# the answer was lost: either outcome is fine, if complete
				nunknown=$((nunknown + 1))
				if ibdev_exists rroce_fs; then
					wait_for 10 port_active rroce_fs || t_fail "rroce_fs (added at $pct %, answer lost) not ACTIVE"
					expect_ok "rdma link delete" rdma link delete rroce_fs
				fi
			elif [ $rc = 0 ]; then
				nok=$((nok + 1))
				ibdev_exists rroce_fs || t_fail "link add succeeded at $pct % but rroce_fs does not exist"
				wait_for 10 port_active rroce_fs || t_fail "rroce_fs (added at $pct %) not ACTIVE"
				expect_ok "rdma link delete rroce_fs" rdma link delete rroce_fs
			else
				nfail=$((nfail + 1))
				msgs="$msgs|$out"
				# a failed add leaves nothing (it may still be on its way out)
				if ! wait_for 10 not ibdev_exists rroce_fs; then
					t_fail "failed link add at $pct % left rroce_fs behind: $out"
					rdma link delete rroce_fs 2>/dev/null
				fi
			fi
		done
	done
	echo 0 >"$FS/probability"
	echo N >"$FS/task-filter"
	nl_pid=${NL_PID:-}
	[ -n "${NL[1]:-}" ] && eval "exec ${NL[1]}>&-"
	if [ -n "$nl_pid" ]; then
		wait_for 30 not kill -0 "$nl_pid" || kill -9 "$nl_pid" 2>/dev/null
		wait "$nl_pid" 2>/dev/null || diag "nl_link_add.py --serve exited $?"
	fi
	trap - PIPE
	diag "link add: $nok succeeded, $nfail failed, $nunknown answers lost; messages: $(printf '%s' "${msgs#|}" | tr '|' '\n' | sort | uniq -c | tr '\n' ';')"
	at_least "failed link adds (injection reached it)" "$nfail" 1
	expect_ok "rdma link add without injection" rdma link add rroce_fs type rroce netdev rrfs0
	expect_wait "rroce_fs ACTIVE" 10 port_active rroce_fs
	expect_ok "rdma link delete" rdma link delete rroce_fs
	expect_eq "UDP $ROCE_PORT sockets in init_net" "$(udp4791)" "$base_udp"
	ip link del rrfs0
fi
t_end

# 10
t_begin "1 % of atomic slab allocations fail (system-wide) during send/write/read 1 MiB: data verified"
if [ -n "$RC_WHY" ]; then
	t_skip "$RC_WHY"
else
	echo Y >"$FS/ignore-gfp-wait"
	echo N >"$FS/task-filter"
	echo 500 >"$FS/times"
	# the injection starts once the QPs are connected: the data path is
	# under test here, the setup verbs are tested above (a modify to RTR
	# may rightly fail with ENOBUFS when ib_core's route lookup cannot
	# allocate)
	rc_xfer 600 --ops send,write,read --total 1M --msg 64K --set-when-connected "$FS/probability=1"
	echo 0 >"$FS/probability"
	echo N >"$FS/ignore-gfp-wait"
	diag "failslab times left: $(cat "$FS/times") of 500"
	for c in completion_errors retry_exceeded; do
		expect_eq "$DEV0 $c delta" "${XD0[$c]}" 0
	done
	t_end
fi

# 11
fs_restore
t_fresh_xfer "after the injections"

test_done
