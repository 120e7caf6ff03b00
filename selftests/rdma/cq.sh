#!/usr/bin/env bash
# Completion queues through the provider: mapped ring geometry, empty polls,
# notification arming, errnos for bad sizes and vectors, many CQs, and
# reclaim at process exit.
#
# ibv_resize_cq (py/cq_resize.py): empty CQs up and down, 0 / -1 /
# max_cqe + 1 -> EINVAL; with CQEs outstanding (10 SENDs over an RC QP pair
# $DEV0 -> $DEV1): poll some, grow, shrink to exactly what is left, shrink
# below it -> EINVAL, poll the rest, every wr_id once and in order; the
# sender's CQ resized while its completions arrive.  On rxe both ends are
# on $DEV0 (it has no network namespace support).
# shellcheck source-path=SCRIPTDIR source=../lib.sh
. "$(dirname "$0")/../lib.sh"
test_init 3

why=$(provider_unavailable)
if [ -n "$why" ]; then
	ktap_skip "CQ verbs" "$why"
	ktap_skip "CQ resize" "$why"
	test_done
fi

py_checks "CQ verbs through pyverbs on $DEV0" cq_verbs.py "$DEV0"

why=$(datapath_unavailable "$DEV0" "$IP0")
peer_gids
desc="CQ resize: empty, with CQEs outstanding ($DEV0 -> $RDEV), under arriving completions"
if [ -n "$why" ]; then
	ktap_skip "$desc" "$why"
else
	PY_CHECKS_TMO=$((300 * ${RROCE_TIMEOUT_SCALE:-1})) \
		py_checks "$desc" cq_resize.py "$DEV0" "$G0" "$RDEV" "$G1"
fi

test_done
