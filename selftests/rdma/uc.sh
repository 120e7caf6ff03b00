#!/usr/bin/env bash
# UC (Unreliable Connected) through pyverbs (py/uc_checks.py), a UC QP pair
# between $DEV0 (requester) and $DEV1 (responder, netns peer) in one
# process:
#   - RDMA READ and atomics cannot be posted on UC (EINVAL); SEND, SEND
#     with immediate, RDMA WRITE, WRITE with immediate and a zero-length
#     SEND move data intact, with the right completions on both sides
#   - under netem "loss 5%" on $IF0, UC loses whole messages only: every
#     receive that completes holds one intact message, in order, once; the
#     receive WQE of a dropped message is reused, never completed in error;
#     without loss all later messages arrive
# The uc_dropped counter of $DEV1 must show the drops.  On rxe
# (RROCE_TYPE=rxe) both ends are on $DEV0 and the loss case is skipped
# (a netem qdisc on $IF0 does not touch rxe's local traffic).
# shellcheck source-path=SCRIPTDIR source=../lib.sh
. "$(dirname "$0")/../lib.sh"
test_init 3
trap 'tc qdisc del dev "$IF0" root 2>/dev/null' EXIT

why=$(provider_unavailable)
[ -n "$why" ] || why=$(datapath_unavailable "$DEV0" "$IP0")
peer_gids
PY_CHECKS_TMO=$((300 * ${RROCE_TIMEOUT_SCALE:-1}))

if [ -n "$why" ]; then
	ktap_skip "UC verbs and data" "$why"
	ktap_skip "UC under packet loss" "$why"
	test_done
fi
py_checks "UC: READ/atomics refused (EINVAL); SEND, WRITE (+IMM) data and completions" \
	uc_checks.py "$DEV0" "$G0" "$RDEV" "$G1" ops
if [ "$RROCE_TYPE" = rxe ]; then
	ktap_skip "UC under netem loss 5%" "rxe: both ends on one device, no wire to lose packets on"
else
	py_checks "UC under netem loss 5% on $IF0: only whole messages lost, delivered ones intact and in order" \
		uc_checks.py "$DEV0" "$G0" "$RDEV" "$G1" loss "$IF0"
fi

test_done
