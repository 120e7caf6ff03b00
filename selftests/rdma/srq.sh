#!/usr/bin/env bash
# Shared receive queues through the provider (py/srq_verbs.py): device
# limits, create/modify/query with their errnos for bad attributes,
# post_srq_recv limits, RC and UD QPs with an SRQ; traffic from two RC
# QPs on $DEV0 into two QPs sharing one SRQ on $DEV1 with the data and the
# completions' QP numbers checked, IBV_EVENT_SRQ_LIMIT_REACHED once when
# fewer than srq_limit receives remain, a QP in ERR or destroyed leaving
# the SRQ's receives to the other QP.  (ibv_srq_pingpong: pingpong.sh.)
# On rxe both ends are on $DEV0 (it has no network namespace support).
# shellcheck source-path=SCRIPTDIR source=../lib.sh
. "$(dirname "$0")/../lib.sh"
test_init 2

desc="SRQ verbs, limit event and traffic ($DEV0 -> two QPs on one SRQ of $DEV1)"
why=$(provider_unavailable)
[ -n "$why" ] || why=$(datapath_unavailable "$DEV0" "$IP0")
peer_gids
if [ -n "$why" ]; then
	ktap_skip "$desc" "$why"
else
	PY_CHECKS_TMO=$((300 * ${RROCE_TIMEOUT_SCALE:-1})) \
		py_checks "$desc" srq_verbs.py "$DEV0" "$G0" "$RDEV" "$G1"
fi

test_done
