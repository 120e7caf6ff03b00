#!/usr/bin/env bash
# Transmit back-pressure: netem "slot 1ms packets 8 limit 300" on the egress of
# both veth ends, a slow link with a 300-packet queue, then py/rc_xfer.py
# moves $RC_NETEM_TOTAL by SEND, RDMA WRITE and RDMA READ as in the other
# rc_netem_* tests (16 max_rd_atomic 256 KiB READs are 4,096 response
# packets at once; a 512-PSN window is 512 request packets).  A QP stops at
# 256 packets of its own in the stack (net/txgauge.rs) and goes on when they
# drained, so the queue never overflows: no packet may fail to send
# (tx_errors) on either device, and the sender of the data (DEV0 for SEND
# and WRITE, DEV1's responder for READ) must have waited (tx_waits).
# Without the back-pressure the first burst overflowed the queue and every
# lost packet cost a go-back-N.  Nothing is lost, so the requester may
# resend at most a quarter of the packets the data needs (ACK timeouts of
# 67 ms still fire in a loaded TCG guest: 23 in one CI run, 2,182 packets
# resent for 16,384): without the back-pressure SEND resent ~4,200, and READ
# once resent 5,359 requests here while its responder sent 203,062
# responses for 16,384 (duplicate READ streams; 35.8 s instead of 2.5 s).
# shellcheck source-path=SCRIPTDIR source=../lib.sh
. "$(dirname "$0")/../lib.sh"

# shellcheck disable=SC2317  # called by rc_netem_test
paced() {
	expect_eq "$DEV0 tx_errors delta" "${XD0[tx_errors]}" 0
	expect_eq "$DEV1 tx_errors delta" "${XD1[tx_errors]}" 0
	local need
	if need=$(rc_netem_need); then
		[ "${XD0[retransmits]}" -le $((need / 4)) ] ||
			t_fail "$DEV0 retransmits delta: ${XD0[retransmits]}, more than a quarter of $need"
	fi
	if [ "$1" = read ]; then
		at_least "$DEV1 tx_waits delta" "${XD1[tx_waits]}" 1
	else
		at_least "$DEV0 tx_waits delta" "${XD0[tx_waits]}" 1
	fi
}
rc_netem_test "slot 1ms packets 8 limit 300" paced
