#!/usr/bin/env bash
# Queue-pair control verbs through the provider: RC/UC/UD creation with
# capability write-back, the modify_qp state machine with its errnos and
# value checks, query_qp, limits, reclaim at process exit.
. "$(dirname "$0")/../lib.sh"
test_init 2

why=$(provider_unavailable)
if [ -n "$why" ]; then
	ktap_skip "QP verbs" "$why"
	test_done
fi

idx=$(gid_index "$DEV0" "$(gid_v4 "$IP0")")
py_checks "QP verbs through pyverbs on $DEV0" qp_verbs.py "$DEV0" "${idx:-1}"

test_done
