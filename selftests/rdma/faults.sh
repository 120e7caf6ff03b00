#!/usr/bin/env bash
# RC under heavy packet faults (netem on the egress of both veth ends, so
# requests, responses and ACKs all suffer), every byte and completion
# checked by py/rc_xfer.py ($DEV0 requester -> $DEV1 responder):
#   1-3  loss 10 %: SEND, RDMA WRITE, RDMA READ; retransmits must rise
#   4-6  corrupt 5 % (one flipped bit per corrupted frame): the ICRC check
#        drops them and counts rx_icrc_errors (on $DEV1 for requests,
#        on $DEV0 for READ responses); retransmits must rise.  Frames whose
#        flipped bit lands in the IP header are dropped by the IP stack
#        (checksum) before they reach us; a flip in the Ethernet source
#        address is harmless (not covered by the ICRC, shown in the
#        diagnostics as IpExt/Ip counters)
#   7-9  everything at once: delay 1ms reorder 25 % loss 3 % duplicate 3 %
#        corrupt 3 %
# The QPs use retry_cnt 7 (never runs out in rroce), so a transfer ends
# only when all data arrived or the deadline passes; no error completion
# and no retry exhaustion may be counted.  $FAULTS_TOTAL bytes per
# operation (default 2 MiB in 64 KiB messages; 512 KiB on the debug
# kernel).  Link down/up, netdev removal and rmmod during traffic:
# link_faults.sh.
# selftest-timeout=900
# shellcheck source-path=SCRIPTDIR source=../lib.sh
. "$(dirname "$0")/../lib.sh"

test_init 10
trap 'netem_clear' EXIT
rc_xfer_setup

total=${FAULTS_TOTAL:-$([ "${RROCE_KERNEL_FLAVOR:-plain}" = debug ] && echo 512K || echo 2M)}
msg=${FAULTS_MSG:-64K}

# kernel IP/UDP drop counters of both namespaces (diagnostics: corrupted
# headers end there, not in the ICRC check)
ipstat() {
	local pre=()
	[ -n "${1:-}" ] && pre=(ip netns exec "$1")
	"${pre[@]}" nstat -asz 2>/dev/null |
		awk '$1 ~ /^(IpInHdrErrors|IpInAddrErrors|IpExtInCsumErrors|UdpInErrors|UdpNoPorts|IpExtInNoRoutes)$/ { printf "%s=%s ", $1, $2 }'
}

# check_loss OP, check_corrupt OP, check_mix OP: assertions on XD0/XD1
check_loss() {
	at_least "$DEV0 retransmits delta" "${XD0[retransmits]}" 1
}
check_corrupt() {
	local rx=$DEV1 n=${XD1[rx_icrc_errors]}
	if [ "$1" = read ]; then rx=$DEV0 n=${XD0[rx_icrc_errors]}; fi
	at_least "$rx rx_icrc_errors delta (corrupted data packets dropped)" "$n" 1
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
	local spec=$1 check=$2 op out rc nwhy= c
	if [ -z "$RC_WHY" ]; then
		# shellcheck disable=SC2086  # SPEC is several words
		out=$(netem_set $spec 2>&1) || nwhy="cannot add the netem qdisc ($spec): $out"
	fi
	for op in send write read; do
		t_begin "$op $total under netem '$spec' on $IF0 and $IF1: data verified, recovery counted"
		if [ -n "$RC_WHY" ]; then
			t_skip "$RC_WHY"
			continue
		fi
		if [ -n "$nwhy" ]; then
			t_fail "$nwhy"
			t_end
			continue
		fi
		diag "init_net before: $(ipstat)"
		rc_xfer 300 --ops "$op" --total "$total" --msg "$msg"
		rc=$?
		netem_stats
		diag "init_net after: $(ipstat); $NS1: $(ipstat "$NS1")"
		if [ -n "$HWC_WHY" ]; then
			t_fail "no counters: $HWC_WHY"
		elif [ $rc = 0 ]; then
			for c in completion_errors retry_exceeded rnr_retry_exceeded; do
				expect_eq "$DEV0 $c delta" "${XD0[$c]}" 0
				expect_eq "$DEV1 $c delta" "${XD1[$c]}" 0
			done
			"$check" "$op"
		fi
		t_end
	done
	netem_clear
}

run_case "loss 10%" check_loss
run_case "corrupt 5%" check_corrupt
run_case "delay 1ms reorder 25% 50% loss 3% duplicate 3% corrupt 3%" check_mix

test_done
