#!/usr/bin/env bash
# IBTA 1.5 FLUSH with rroce as the responder (py/hostile_pkt.py --only
# flush): libibverbs 44 has no ibv_wr_flush, so the FLUSH requests an
# rdma_rxe or mlx5 peer with rdma-core >= 45 would send are forged as UDP
# datagrams, in sequence, to a fresh RC pair $DEV0 -> $DEV1 whose QPs and
# region grant IBV_ACCESS_FLUSH_GLOBAL.  Checked: device_cap_flags_ex has
# FLUSH_GLOBAL and not FLUSH_PERSISTENT; reg_mr with FLUSH_PERSISTENT gives
# EOPNOTSUPP; a range FLUSH, a whole-region FLUSH and an empty-range FLUSH
# are each answered (an empty READ response, ignored by the requester that
# never sent them) and move the ePSN by one (a WRITE at the next PSN lands,
# nothing else in the region changes; the whole-region one names a range
# outside the region, which must not be looked at); a duplicate is
# answered again; a persistent FLUSH is NAKed (remote access) and the
# responder QP goes to ERR, and so is, on fresh pairs whose QPs grant the
# placement type, a FLUSH to a region without FLUSH access and a
# persistent one to a region that cannot grant it; every counter of both
# devices moves exactly as it should.  The
# requester side (FETH/RETH packets, completion by the empty READ response
# or a covering ACK, exactly-once execution under loss) is host-tested in
# proto (rc::sim, rc::req, rc::resp, the fuzz targets); the FLUSH NAK cases
# (no access, no placement type, unknown level) are in hostile_packets.sh.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
. "$(dirname "$0")/../lib.sh"
test_init 2

why=$(provider_unavailable)
[ -n "$why" ] || why=$(datapath_unavailable "$DEV0" "$IP0")
[ -n "$why" ] || [ "$RROCE_TYPE" != rxe ] || why="rroce-only: forged packets target rroce's counters and namespaces"
peer_gids
PY_CHECKS_TMO=$((300 * ${RROCE_TIMEOUT_SCALE:-1}))

if [ -n "$why" ]; then
	ktap_skip "FLUSH as a responder" "$why"
else
	py_checks "FLUSH (IBTA 1.5) as a responder: answers, ePSN, duplicate, persistent refused, counters" \
		hostile_pkt.py "$DEV0" "$G0" "$RDEV" "$G1" --only flush --timeout "$RC_ACK_TIMEOUT"
fi
test_done
