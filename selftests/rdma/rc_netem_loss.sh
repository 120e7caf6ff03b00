#!/usr/bin/env bash
# RC recovery from packet loss: netem "loss 2%" on the egress of both veth
# ends (rr0: requests; rr1 in netns peer: responses and ACKs), then
# py/rc_xfer.py moves $RC_NETEM_TOTAL (16 MiB; 8 MiB on the debug kernel)
# by SEND, RDMA WRITE and RDMA READ from $DEV0 to $DEV1 in 256 KiB messages,
# every byte and every completion checked.  No error completion or retry
# exhaustion may be counted, and $DEV0 must have retransmitted (go-back-N
# after a sequence NAK or an ACK timeout) and halved its window for it
# (window_cuts: the window then shrinks towards 16 PSNs, so each loss
# resends about that many packets, not 512).  The counter deltas of both
# devices and the qdisc statistics (packets dropped) are printed.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
. "$(dirname "$0")/../lib.sh"

# shellcheck disable=SC2317  # called by rc_netem_test
recovered() {
	at_least "$DEV0 retransmits delta" "${XD0[retransmits]}" 1
	at_least "$DEV0 window_cuts delta" "${XD0[window_cuts]}" 1
}
rc_netem_test "loss 2%" recovered
