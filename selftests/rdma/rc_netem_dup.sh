#!/usr/bin/env bash
# RC handling of duplicated packets: netem "duplicate 5%" on the egress of
# both veth ends (rr0: requests; rr1 in netns peer: responses and ACKs),
# then py/rc_xfer.py moves $RC_NETEM_TOTAL (16 MiB; 8 MiB on the debug
# kernel) by SEND, RDMA WRITE and RDMA READ from $DEV0 to $DEV1 in 256 KiB
# messages, every byte and every completion checked (a duplicate executed
# twice or completed twice fails it).  No error completion or retry
# exhaustion may be counted, and $DEV1 must have counted duplicate requests.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
. "$(dirname "$0")/../lib.sh"

# shellcheck disable=SC2317  # called by rc_netem_test
recovered() {
	at_least "$DEV1 duplicate_requests delta" "${XD1[duplicate_requests]}" 1
}
rc_netem_test "duplicate 5%" recovered
