#!/usr/bin/env bash
# Transmit back-pressure: netem "slot 1ms packets 8 limit 300" on the egress of
# both veth ends, a slow link with a 300-packet queue, then py/rc_xfer.py
# moves $RC_NETEM_TOTAL by SEND, RDMA WRITE and RDMA READ as in the other
# rc_netem_* tests (16 max_rd_atomic 256 KiB READs are 4,096 response
# packets at once; a 512-PSN window is 512 request packets).  A QP stops at
# 256 packets of its own in the stack (net/txgauge.rs) and goes on when they
# drained, so the queue never overflows: no packet may fail to send
# (tx_errors) on either device, and the sender of the data (DEV0 for SEND
# and WRITE) must have waited (tx_waits; READ's paced responder need not
# have, on a slow host).
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
	# The requester's window (512 PSNs, sent in bursts of 128 whatever the
	# host's speed) always runs ahead of the link, so SEND and WRITE must
	# have waited.  READ's responder is paced (32 responses per receive
	# batch, 128 per run of its work item): on a slow, loaded host it once
	# sent only 4,800 packets/s (CI, 2026-12-07), never 256 ahead of the
	# link's 8 per ms, and rightly never waited; for READ the check that
	# matters is the one above (no packet failed to send).
	if [ "$1" = read ]; then
		diag "$DEV1 tx_waits delta: ${XD1[tx_waits]:-0} (READ: not required)"
	else
		at_least "$DEV0 tx_waits delta" "${XD0[tx_waits]}" 1
	fi
}
rc_netem_test "slot 1ms packets 8 limit 300" paced
