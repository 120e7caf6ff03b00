#!/usr/bin/env bash
# Memory regions through the provider: keys, access-flag errnos, many
# registrations, page pinning accounted and released, reclaim at exit;
# ibv_rereg_mr (py/mr_rereg.py): access, PD and translation changes checked
# by RDMA WRITE/READ/SEND from $DEV0 to an MR on $DEV1 (keys kept, refused
# accesses change nothing, VmPin follows the new range, dereg unpins).
. "$(dirname "$0")/../lib.sh"
test_init 3

why=$(provider_unavailable)
if [ -n "$why" ]; then
	ktap_skip "MR verbs" "$why"
	ktap_skip "ibv_rereg_mr" "$why"
	test_done
fi

py_checks "MR verbs through pyverbs on $DEV0" mr_verbs.py "$DEV0"

why=$(datapath_unavailable "$DEV0" "$IP0")
peer_gids
PY_CHECKS_TMO=$((200 * ${RROCE_TIMEOUT_SCALE:-1}))
if [ -n "$why" ]; then
	ktap_skip "ibv_rereg_mr" "$why"
else
	py_checks "ibv_rereg_mr: access, PD, translation, checked by traffic $DEV0 -> $RDEV" \
		mr_rereg.py "$DEV0" "$G0" "$RDEV" "$G1"
fi

test_done
