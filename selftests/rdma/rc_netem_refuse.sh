#!/usr/bin/env bash
# A device queue that refuses packets: netem "slot 10ms packets 8 limit 16"
# on the egress of both veth ends, a slow link (800 packets/s, slower than
# the debug kernel's sender under TCG) with a 16-packet queue (a
# QP stops only at 256 packets of its own in the stack, net/txgauge.rs, so
# the queue overflows and the stack refuses packets: NET_XMIT_DROP, counted
# as tx_errors), then py/rc_xfer.py moves $RC_NETEM_TOTAL (4 MiB here: 5 s
# a transfer) by SEND, RDMA WRITE and RDMA READ as in the other rc_netem_*
# tests.  A refused request
# packet is sent again after a pause (proto::rc::req::Requester::refused),
# and so is a refused READ response (dp.rs, send_pending): nothing is lost
# on the wire, so the requester may resend at most a quarter of the packets
# the data needs and the data's sender (DEV0 for SEND and WRITE, DEV1's
# READ responses) may send at most a quarter more than it needs.
# Until 2026-12-08 a refused packet counted as lost: the rest of the burst
# was built and refused too, and go-back-N resent it all (a sequence NAK's
# round trip, or an ACK timeout when refused packets ended the burst).
# shellcheck source-path=SCRIPTDIR source=../lib.sh
. "$(dirname "$0")/../lib.sh"

# shellcheck disable=SC2317  # called by rc_netem_test
refusing() {
	local need sent errs
	if [ "$1" = read ]; then
		sent=${XD1[tx_packets]} errs=${XD1[tx_errors]}
	else
		sent=${XD0[tx_packets]} errs=${XD0[tx_errors]}
	fi
	diag "$1: the data's sender sent $sent packets, $errs refused; $DEV0 ack_timeouts ${XD0[ack_timeouts]:-0}, seq_naks_rcvd ${XD0[seq_naks_rcvd]:-0}, retransmits ${XD0[retransmits]:-0}"
	# Without refusals the test would prove nothing.
	at_least "$1: packets the data's sender saw refused" "$errs" 1
	need=$(rc_netem_need) || return 0
	# A pause that adapts to the queue (proto::rc::req::Backoff) costs
	# about one refused try per four packets sent here; READ's responder
	# once saw 37,614 refusals for 4,096 packets when each refusal was a
	# loss (plain kernel, 2026-12-08).
	[ "$errs" -le $((need / 2)) ] ||
		t_fail "$1: $errs packets refused, more than half of $need"
	[ "${XD0[retransmits]}" -le $((need / 4)) ] ||
		t_fail "$DEV0 retransmits delta: ${XD0[retransmits]}, more than a quarter of $need"
	[ "$sent" -le $((need + need / 4)) ] ||
		t_fail "$1: the data's sender sent $sent packets, more than $need and a quarter"
}
RC_NETEM_TOTAL=${RC_NETEM_TOTAL:-4M}
rc_netem_test "slot 10ms packets 8 limit 16" refusing
