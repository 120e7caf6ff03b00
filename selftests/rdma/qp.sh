#!/usr/bin/env bash
# Queue-pair control verbs through the provider: RC/UC/UD creation with
# capability write-back, the modify_qp state machine with its errnos and
# value checks, query_qp, limits, reclaim at process exit; then
# py/qp_live_attrs.py: min_rnr_timer changed in RTS reaches the wire (the
# RNR NAKs of a QP whose peer writes into a tap device).
. "$(dirname "$0")/../lib.sh"
test_init 3

why=$(provider_unavailable)
if [ -n "$why" ]; then
	ktap_skip "QP verbs" "$why"
	ktap_skip "attributes changed in RTS reach the wire" "$why"
	test_done
fi

idx=$(gid_index "$DEV0" "$(gid_v4 "$IP0")")
py_checks "QP verbs through pyverbs on $DEV0" qp_verbs.py "$DEV0" "${idx:-1}"
live="attributes changed in RTS reach the wire (py/qp_live_attrs.py)"
if [ "$RROCE_TYPE" = rxe ]; then
	ktap_skip "$live" "rroce devices on a tap only"
elif [ -c /dev/net/tun ]; then
	py_checks "$live" qp_live_attrs.py --dev rroce9 --ifname rrtap0
else
	ktap_skip "$live" "no /dev/net/tun"
fi

test_done
