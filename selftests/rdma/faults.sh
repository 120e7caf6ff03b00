#!/usr/bin/env bash
# RC under heavy packet faults (netem on the egress of both veth ends, so
# requests, responses and ACKs all suffer), every byte and completion
# checked by py/rc_xfer.py ($DEV0 requester -> $DEV1 responder), SEND,
# RDMA WRITE and RDMA READ of $FAULTS_TOTAL each (2 MiB in 64 KiB messages;
# 512 KiB on the debug kernel), one subtest per fault:
#   1  loss 10 %: retransmits must rise
#   2  corrupt 5 % (one flipped bit per corrupted frame): the ICRC check
#      drops them and counts rx_icrc_errors on $DEV1 (requests) and on
#      $DEV0 (READ responses, ACKs); retransmits must rise.  Frames whose
#      flipped bit lands in the IP or UDP header are dropped by the IP/UDP
#      stack before they reach us (IpExtInCsumErrors, UdpNoPorts... shown
#      as diagnostics); a flip in the Ethernet source address is harmless
#      (not covered by the ICRC)
#   3  everything at once: delay 1ms reorder 25% 50% loss 3% duplicate 3%
#      corrupt 3%
# The QPs use retry_cnt 7 (never runs out in rroce), so a transfer ends
# only when all data arrived or the deadline passes; no error completion
# and no retry exhaustion may be counted.  Link down/up, netdev removal and
# rmmod during traffic: link_faults.sh.
# selftest-timeout=900
# shellcheck source-path=SCRIPTDIR source=../lib.sh
. "$(dirname "$0")/../lib.sh"

test_init 4
trap 'netem_clear' EXIT
rc_xfer_setup

total=${FAULTS_TOTAL:-$([ "${RROCE_KERNEL_FLAVOR:-plain}" = debug ] && echo 512K || echo 2M)}
# Under these faults a lost tail (the last packets of a burst, or their
# ACK) is only recovered by the ACK timeout: ~30 of them in the loss case.
# The debug kernel's default exponent 18 (1.07 s each, see RC_ACK_TIMEOUT
# in lib.sh) made that case mostly waiting; 16 (268 ms) is still 4x the
# plain kernel's 14.  With retry_cnt 7, which never runs out, a timeout
# that fires early costs a retransmission, never the QP.
[ "${RROCE_KERNEL_FLAVOR:-plain}" = debug ] && RC_ACK_TIMEOUT=${RROCE_FAULTS_ACK_TIMEOUT:-16}
msg=${FAULTS_MSG:-64K}

# kernel IP/UDP drop counters of both namespaces (diagnostics: corrupted
# headers end there, not in the ICRC check)
ipstat() {
	local pre=()
	[ -n "${1:-}" ] && pre=(ip netns exec "$1")
	"${pre[@]}" nstat -asz 2>/dev/null |
		awk '$1 ~ /^(IpInHdrErrors|IpInAddrErrors|IpExtInCsumErrors|UdpInErrors|UdpNoPorts|IpExtInNoRoutes)$/ { printf "%s=%s ", $1, $2 }'
}

# check_loss, check_corrupt, check_mix: assertions on XD0/XD1
check_loss() {
	at_least "$DEV0 retransmits delta" "${XD0[retransmits]}" 1
}
check_corrupt() {
	at_least "$DEV1 rx_icrc_errors delta (corrupted requests dropped)" "${XD1[rx_icrc_errors]}" 1
	at_least "$DEV0 rx_icrc_errors delta (corrupted responses dropped)" "${XD0[rx_icrc_errors]}" 1
	at_least "$DEV0 retransmits delta" "${XD0[retransmits]}" 1
}
check_mix() {
	at_least "$DEV0 retransmits delta" "${XD0[retransmits]}" 1
	at_least "rx_icrc_errors delta on $DEV0 + $DEV1" $((XD0[rx_icrc_errors] + XD1[rx_icrc_errors])) 1
	at_least "$DEV1 duplicate_requests + out_of_sequence delta" \
		$((XD1[duplicate_requests] + XD1[out_of_sequence])) 1
}

# run_case SPEC CHECK
run_case() {
	local spec=$1 check=$2 out rc c
	t_begin "send, write, read $total each under netem '$spec' on $IF0 and $IF1: data verified, recovery counted"
	if [ -n "$RC_WHY" ]; then
		t_skip "$RC_WHY"
		return
	fi
	# shellcheck disable=SC2086  # SPEC is several words
	if ! out=$(netem_set $spec 2>&1); then
		t_fail "cannot add the netem qdisc ($spec): $out"
		t_end
		return
	fi
	diag "init_net before: $(ipstat); $NS1: $(ipstat "$NS1")"
	rc_xfer 300 --ops send,write,read --total "$total" --msg "$msg"
	rc=$?
	netem_stats
	netem_clear
	diag "init_net after: $(ipstat); $NS1: $(ipstat "$NS1")"
	if [ -n "$HWC_WHY" ]; then
		t_fail "no counters: $HWC_WHY"
	elif [ $rc = 0 ]; then
		for c in completion_errors retry_exceeded rnr_retry_exceeded; do
			expect_eq "$DEV0 $c delta" "${XD0[$c]}" 0
			expect_eq "$DEV1 $c delta" "${XD1[$c]}" 0
		done
		"$check"
	fi
	t_end
}

run_case "loss 10%" check_loss
run_case "corrupt 5%" check_corrupt
run_case "delay 1ms reorder 25% 50% loss 3% duplicate 3% corrupt 3%" check_mix

test_done
