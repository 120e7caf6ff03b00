#!/usr/bin/env bash
# Memory windows through the provider (py/mw_verbs.py): device caps, type 1
# (ibv_bind_mw) and type 2B (IBV_WR_BIND_MW, ibv_wr_bind_mw) binds with
# RDMA WRITE/READ through the window keys checked byte for byte, accesses
# outside the window or without its access refused (REM_ACCESS_ERR), bind
# errors (region without MW_BIND access, remote write without local write,
# range, type 2 bound twice) completing with MW_BIND_ERR, LOCAL_INV and
# SEND_WITH_INV of a type-2 window then access refused, invalidating an
# invalid key, dereg of a region with a bound window (EBUSY), dealloc of a
# bound window; after each error a fresh QP pair transfers fine.  $DEV1
# owns the memory, $DEV0 accesses it.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
. "$(dirname "$0")/../lib.sh"
test_init 2

desc="memory windows type 1 and 2B ($DEV0 -> windows on $DEV1)"
why=$(provider_unavailable)
[ -n "$why" ] || why=$(datapath_unavailable "$DEV0" "$IP0")
peer_gids
if [ -n "$why" ]; then
	ktap_skip "$desc" "$why"
else
	PY_CHECKS_TMO=$((300 * ${RROCE_TIMEOUT_SCALE:-1})) \
		py_checks "$desc" mw_verbs.py "$DEV0" "$G0" "$RDEV" "$G1"
fi

test_done
