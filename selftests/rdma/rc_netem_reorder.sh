#!/usr/bin/env bash
# RC recovery from reordering: netem "reorder 25% 50% delay 1ms" (a quarter
# of the packets, correlated, overtake the others, which are held back
# 1 ms) on the egress of both veth ends (rr0: requests; rr1 in netns peer:
# responses and ACKs), then py/rc_xfer.py moves $RC_NETEM_TOTAL (16 MiB;
# 8 MiB on the debug kernel) by SEND, RDMA WRITE and RDMA READ from $DEV0 to
# $DEV1 in 256 KiB messages, every byte and every completion checked.  No
# error completion or retry exhaustion may be counted, and the counters
# must show the recovery: out-of-sequence requests at $DEV1, sequence NAKs
# received or retransmissions at $DEV0.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
. "$(dirname "$0")/../lib.sh"

# shellcheck disable=SC2317  # called by rc_netem_test
recovered() {
	at_least "$DEV1 out_of_sequence + $DEV0 seq_naks_rcvd + $DEV0 retransmits delta" \
		$((XD1[out_of_sequence] + XD0[seq_naks_rcvd] + XD0[retransmits])) 1
}
rc_netem_test "reorder 25% 50% delay 1ms" recovered
