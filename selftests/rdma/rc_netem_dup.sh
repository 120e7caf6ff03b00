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

# A READ is 64 requests and 16,384 responses: no request is duplicated in
# 3.7 % of the runs (0.95^64), so a duplicated response, ignored by the
# requester, counts too.
# shellcheck disable=SC2317  # called by rc_netem_test
recovered() {
	if [ "$1" = read ]; then
		at_least "$DEV1 duplicate_requests + $DEV0 ignored_responses delta" \
			$((XD1[duplicate_requests] + XD0[ignored_responses])) 1
	else
		at_least "$DEV1 duplicate_requests delta" "${XD1[duplicate_requests]}" 1
	fi
}
rc_netem_test "duplicate 5%" recovered
