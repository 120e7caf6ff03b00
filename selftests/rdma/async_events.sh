#!/usr/bin/env bash
# Affiliated QP async events (py/async_events.py) through
# ibv_get_async_event on the responder's context, RC QPs $DEV0 -> $DEV1:
# COMM_EST (first packet in RTR, once), QP_ACCESS_ERR (bad rkey),
# QP_REQ_ERR (misaligned atomic), none for good traffic or a user-requested
# ERR; QP_LAST_WQE_REACHED is checked by srq.sh, SRQ_LIMIT_REACHED too,
# and PORT_ERR / PORT_ACTIVE on $DEV0 when $IF0 goes down and up.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
. "$(dirname "$0")/../lib.sh"
test_init 2

why=$(provider_unavailable)
[ -n "$why" ] || why=$(datapath_unavailable "$DEV0" "$IP0")
peer_gids
if [ "$RROCE_TYPE" = rxe ] && [ -z "$why" ]; then
	diag "$RROCE_TYPE has no network namespace support: both ends on $DEV0"
fi
PY_CHECKS_TMO=$((200 * ${RROCE_TIMEOUT_SCALE:-1}))
if [ -n "$why" ]; then
	ktap_skip "QP async events" "$why"
else
	py_checks "async events: COMM_EST, QP_ACCESS_ERR, QP_REQ_ERR, none when not due; PORT_ERR/PORT_ACTIVE" \
		async_events.py "$DEV0" "$G0" "$RDEV" "$G1" "$IF0"
fi

test_done
