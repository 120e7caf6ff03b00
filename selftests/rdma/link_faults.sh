#!/usr/bin/env bash
# The link under live RC traffic (py/rc_xfer.py $DEV0 -> $DEV1 running in
# the background, every byte and completion checked):
#   1  ip link set $IF1 down for 3 s, then up, QPs with retry_cnt 7 (never
#      runs out): the transfer completes after the link returns, data
#      intact; ACK timeouts and retransmits counted
#   2  the same with retry_cnt 1 and a 67 ms ACK timeout (budget ~0.13 s,
#      far below 3 s): the transfer ends in RETRY_EXC_ERR (the QP goes to
#      the error state, later WRs are flushed), retry_exceeded counts it;
#      a fresh transfer works once the link is up
#   3  ip link del $IF0 (the veth pair, so $DEV0 and $DEV1) mid-transfer,
#      retry_cnt 2: the devices go away (rroce: at once, its
#      disassociate_ucontext cuts the process off: a verbs call or, once
#      its CQ is empty, polling fails with EIO and it exits; rxe: once the
#      process has seen error completions and closed them;
#      never a crash), no UDP socket is left, and after rebuilding the
#      topology a fresh transfer works
#   4  rmmod $MOD mid-transfer: rroce unloads at once and cuts the process
#      off (disassociate.sh checks what the process sees); rxe is refused
#      while the process holds the device (ib_uverbs pins its module), the
#      transfer completes intact, and rmmod works after it exits; reload,
#      re-add, fresh transfer
#   5  ip netns del $NS1 mid-transfer, retry_cnt 2: like 3 from the peer's
#      side
# selftest-timeout=900
# shellcheck source-path=SCRIPTDIR source=../lib.sh
. "$(dirname "$0")/../lib.sh"

test_init 6
rc_xfer_setup
t0=$SECONDS
took() { diag "subtest took $((SECONDS - t0)) s"; t0=$SECONDS; }

# Bytes per background transfer: enough to still be running when the
# fault hits (the fault is injected as soon as packets flow, and the link
# goes down a few hundred ms later).  16 MiB was enough until the ACKs of
# a receive batch were coalesced (2026-12-05): then a 16 MiB WRITE took
# 0.76 s in CI's plain VM and had completed before the link went down.
BIG=${LINK_FAULTS_TOTAL:-$([ "${RROCE_KERNEL_FLAVOR:-plain}" = debug ] && echo 4M || echo 64M)}
SMALL=${LINK_FAULTS_SMALL:-1M}
# A transfer that must still run when a removal takes effect is longer:
# `ip netns del` only drops a reference (the namespace is dismantled later
# by a worker, which under TCG can take seconds), and `ip link del` or
# `rmmod` took 2 s in a loaded CI VM, in which a 16 MiB WRITE had already
# completed (9 MB/s).  A transfer cut off ends at once, whatever its size.
NS_BIG=${LINK_FAULTS_NS_TOTAL:-$([ "${RROCE_KERNEL_FLAVOR:-plain}" = debug ] && echo 64M || echo 256M)}

BG_OUT=/tmp/rroce-bgxfer.$$
bg_pid=
cleanup() {
	[ -n "$bg_pid" ] && kill -9 "$bg_pid" 2>/dev/null
	rm -f "$BG_OUT"
}
trap cleanup EXIT

# bg_xfer ARGS...: rc_xfer.py $DEV0 -> $DEV1 in the background (output in
# $BG_OUT, pid in $bg_pid); counters snapshot in XB0/XB1
bg_xfer() {
	hwc_snap "$DEV0" XB0
	hwc_snap "$DEV1" XB1
	/usr/bin/python3 -u "$RROCE_REPO/selftests/py/rc_xfer.py" "$DEV0" "$RC_G0" "$DEV1" "$RC_G1" \
		--timeout "$RC_ACK_TIMEOUT" --deadline $((300 * ${RROCE_TIMEOUT_SCALE:-1})) "$@" >"$BG_OUT" 2>&1 &
	bg_pid=$!
}
# tx_flowing: $DEV0 sent at least 64 packets since bg_xfer
tx_flowing() {
	local v=0
	read -r v <"$(hwc_dir "$DEV0")/tx_packets" 2>/dev/null
	[ "${v:-0}" -ge $((XB0[tx_packets] + 64)) ]
}
bg_running() { [ -n "$bg_pid" ] && kill -0 "$bg_pid" 2>/dev/null; }
# bg_stuck_diag: where the background transfer is (its state, wait channel
# and kernel stack: a verb that never returns shows here)
bg_stuck_diag() {
	local l
	bg_running || return 0
	diag "rc_xfer.py (pid $bg_pid): $(grep -E '^State' "/proc/$bg_pid/status" 2>/dev/null), wchan $(cat "/proc/$bg_pid/wchan" 2>/dev/null)"
	while IFS= read -r l; do diag "  $l"; done < <(cat "/proc/$bg_pid/stack" 2>/dev/null)
}
# bg_wait TMO: wait for the background transfer; BG_RC = its exit status
# (124 if it had to be killed); output and counter deltas as diagnostics
# (XD0/XD1 stay empty if the devices are gone)
bg_wait() {
	local l
	BG_RC=124
	if wait_for "$1" not bg_running; then
		wait "$bg_pid"
		BG_RC=$?
	else
		kill -9 "$bg_pid" 2>/dev/null
		wait "$bg_pid" 2>/dev/null
		t_fail "rc_xfer.py still running after ${1}s: killed"
	fi
	bg_pid=
	while IFS= read -r l; do diag "$l"; done <"$BG_OUT"
	XD0=() XD1=()
	if ibdev_exists "$DEV0" && ibdev_exists "$DEV1"; then
		hwc_snap "$DEV0" XA0
		hwc_snap "$DEV1" XA1
		hwc_delta XB0 XA0 XD0
		hwc_delta XB1 XA1 XD1
		diag "$DEV0 counters:$(hwc_show XD0)"
		diag "$DEV1 counters:$(hwc_show XD1)"
	fi
}
# start_traffic ARGS...: bg_xfer and wait until packets flow; false (with
# a t_fail) if they do not or the transfer already ended.  The bound is a
# liveness bound, not a speed test: it covers Python's start, the pyverbs
# import and the QP setup, which take ~20 s in a TCG VM that shares the
# host with make check's debug VM (a 30 s bound failed there once).
START_TMO=${LINK_FAULTS_START_TMO:-120}
start_traffic() {
	bg_xfer "$@"
	if ! wait_for "$START_TMO" tx_flowing; then
		t_fail "no packets from $DEV0 within $((START_TMO * ${RROCE_TIMEOUT_SCALE:-1})) s of starting rc_xfer.py"
		bg_stuck_diag
		bg_wait 5
		return 1
	fi
	if ! bg_running; then
		t_fail "rc_xfer.py ended before the fault was injected (raise LINK_FAULTS_TOTAL)"
		bg_wait 5
		return 1
	fi
}
# fresh WHAT: a small transfer (all three operations) must work now
fresh() {
	rc_xfer 200 --ops send,write,read --total "$SMALL" --msg 64K || t_fail "fresh transfer after $1"
}
ns_up_addrs() {
	# link down flushed the IPv6 address of $IF1 (keep_addr_on_down=0):
	# topo_reset rebuilds the topology at the end if needed
	ns "$NS1" ip link set "$IF1" up
}

# 1
t_begin "$IF1 down 3 s and up during a $BIG WRITE, retry_cnt 7: completes, data verified"
if [ -n "$RC_WHY" ]; then
	t_skip "$RC_WHY"
else
	if start_traffic --ops write --total "$BIG" --msg 256K; then
		ns "$NS1" ip link set "$IF1" down
		expect_wait "$DEV0 port leaves ACTIVE" 10 not port_active "$DEV0"
		sleep 3
		bg_running || t_fail "rc_xfer.py ended while the link was down"
		ns_up_addrs
		expect_wait "$DEV0 ACTIVE again" 10 port_active "$DEV0"
		bg_wait 300
		expect_eq "rc_xfer.py exit status" "$BG_RC" 0
		if [ "$BG_RC" = 0 ]; then
			at_least "$DEV0 ack_timeouts delta" "${XD0[ack_timeouts]:-0}" 1
			at_least "$DEV0 retransmits delta" "${XD0[retransmits]:-0}" 1
			expect_eq "$DEV0 retry_exceeded delta" "${XD0[retry_exceeded]:-x}" 0
			expect_eq "$DEV0 completion_errors delta" "${XD0[completion_errors]:-x}" 0
		fi
	fi
	took
	t_end
fi

# 2
t_begin "$IF1 down 3 s during a WRITE with retry_cnt 1, timeout 67 ms: RETRY_EXC_ERR, fresh transfer works after"
if [ -n "$RC_WHY" ]; then
	t_skip "$RC_WHY"
else
	if start_traffic --ops write --total "$BIG" --msg 256K --retry-cnt 1 --timeout 14; then
		ns "$NS1" ip link set "$IF1" down
		sleep 3
		ns_up_addrs
		expect_wait "$DEV0 ACTIVE again" 10 port_active "$DEV0"
		bg_wait 60
		expect_eq "rc_xfer.py exit status" "$BG_RC" 1
		grep -q '^FAIL: .*status RETRY_EXC_ERR' "$BG_OUT" ||
			t_fail "rc_xfer.py did not report a RETRY_EXC_ERR completion"
		at_least "$DEV0 retry_exceeded delta" "${XD0[retry_exceeded]:-0}" 1
		at_least "$DEV0 completion_errors delta" "${XD0[completion_errors]:-0}" 1
		fresh "RETRY_EXC_ERR"
	fi
	took
	t_end
fi

# bg_failed_cleanly: after bg_wait, the transfer must have failed (exit 1)
# with an error completion or a verbs error
bg_failed_cleanly() {
	case $BG_RC in
	0) t_fail "the transfer completed although the device was removed under it" ;;
	1) grep -Eq '^FAIL: .*status (RETRY_EXC_ERR|WR_FLUSH_ERR)|PyverbsRDMAError' "$BG_OUT" ||
		t_fail "rc_xfer.py failed without an error completion or verbs error" ;;
	*) t_fail "rc_xfer.py ended with status $BG_RC (a signal is a crash)" ;;
	esac
}

# bg_cut_off: the device was removed under the transfer and the process cut
# off (disassociate_ucontext): it must end by itself, without a signal,
# with a verbs error: EIO from a call into the kernel, or from polling its
# CQ once empty (the kernel closes the ring of a CQ that ib_core destroys).
bg_cut_off() {
	bg_wait $((30 * ${RROCE_TIMEOUT_SCALE:-1}))
	bg_failed_cleanly
}

# del_during_traffic WHAT SIZE CMD...: subtests 3 and 5
del_during_traffic() {
	local what=$1 size=$2 dpid rc
	shift 2
	if ! start_traffic --ops write --total "$size" --msg 256K --retry-cnt 2; then
		t_end
		return
	fi
	timeout 120 "$@" &
	dpid=$!
	local t=$SECONDS
	if [ "$RROCE_TYPE" = rroce ]; then
		# disassociate_ucontext: the removal does not wait for the process
		wait "$dpid"
		rc=$?
		diag "'$*' returned after $((SECONDS - t)) s"
		expect_eq "'$*' exit status (the process still running)" "$rc" 0
		bg_cut_off
	else
		bg_wait 120
		diag "rc_xfer.py ended $((SECONDS - t)) s after '$*'"
		bg_failed_cleanly
		wait "$dpid"
		rc=$?
		expect_eq "'$*' exit status (after the process closed the device)" "$rc" 0
	fi
	expect_wait "$DEV0 gone" 20 not ibdev_exists "$DEV0"
	expect_wait "$DEV1 gone" 20 not ibdev_exists "$DEV1"
	expect_eq "UDP $ROCE_PORT sockets in init_net" "$(udp4791)" "0 0"
	expect_ok "topo_setup" topo_setup
	expect_ok "links_add" links_add
	expect_wait "$DEV0 ACTIVE" 10 port_active "$DEV0"
	expect_wait "$DEV1 ACTIVE" 10 port_active "$DEV1"
	rc_xfer_setup
	fresh "$what"
	took
	t_end
}

# 3
t_begin "ip link del $IF0 during a WRITE: the process ends with an error (never a signal), devices go, rebuilt topology works"
if [ -n "$RC_WHY" ]; then
	t_skip "$RC_WHY"
else
	del_during_traffic "ip link del" "$NS_BIG" ip link del "$IF0"
fi

# 4
t_begin "rmmod $MOD during a $NS_BIG WRITE: clean (rroce: the process cut off) or refused (rxe: transfer intact), never a crash; reload works"
if [ -n "$RC_WHY" ]; then
	t_skip "$RC_WHY"
else
	if start_traffic --ops write --total "$NS_BIG" --msg 256K; then
		out=$(timeout 60 rmmod "$MOD" 2>&1)
		rc=$?
		if [ $rc = 124 ]; then
			t_fail "rmmod hung (>60 s) with QPs and traffic"
			bg_wait 300
		elif [ $rc = 0 ]; then
			# a driver with disassociate_ucontext: the process is cut off
			diag "rmmod succeeded under traffic (disassociate)"
			bg_cut_off
		else
			diag "rmmod refused while in use (rc $rc): $out"
			[ "$RROCE_TYPE" = rroce ] && t_fail "rroce has disassociate_ucontext: rmmod must not be refused"
			expect_ok "module still loaded" drv_loaded
			bg_wait 300
			expect_eq "rc_xfer.py exit status (transfer went on)" "$BG_RC" 0
			links_del_all
			expect_ok "rmmod after the process exited and the devices were deleted" timeout 60 rmmod "$MOD"
		fi
		drv_loaded || expect_ok "reload" drv_load
		expect_ok "links_add" links_add
		expect_wait "$DEV0 ACTIVE" 10 port_active "$DEV0"
		expect_wait "$DEV1 ACTIVE" 10 port_active "$DEV1"
		rc_xfer_setup
		fresh "rmmod"
	fi
	took
	t_end
fi

# 5
t_begin "ip netns del $NS1 during a WRITE: the process ends with an error (never a signal), devices go, rebuilt topology works"
if [ -n "$RC_WHY" ]; then
	t_skip "$RC_WHY"
else
	del_during_traffic "ip netns del" "$NS_BIG" ip netns del "$NS1"
fi

test_done
