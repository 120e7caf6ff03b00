#!/usr/bin/env bash
# IBTA 1.5 ATOMIC WRITE (py/atomic_write.py): an RC pair of extended QPs,
# $DEV0 requester -> $DEV1 (netns peer) responder and back, 64 ATOMIC
# WRITEs of random values to distinct aligned words, through
# ibv_wr_atomic_write and through ibv_post_send (IBV_WR_ATOMIC_WRITE, the
# value named by one 8-byte SGE): completions IBV_WC_ATOMIC_WRITE in order,
# every word in place, the bytes around untouched; a region without remote
# write access gets IBV_WC_REM_ACCESS_ERR and stays untouched.  The
# requester's own checks (an unaligned target, an SGE beside the value, a
# UC QP) are host tests of proto::wqe.  Interop with rdma_rxe both ways is
# in rxe_interop.sh.  On rxe (RROCE_TYPE=rxe) both ends are $DEV0.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
. "$(dirname "$0")/../lib.sh"
test_init 4

why=$(provider_unavailable)
[ -n "$why" ] || why=$(datapath_unavailable "$DEV0" "$IP0")
peer_gids
PY_CHECKS_TMO=$((300 * ${RROCE_TIMEOUT_SCALE:-1}))

if [ -n "$why" ]; then
	for t in "$DEV0 -> $RDEV" "$DEV0 -> $RDEV (post_send)" "$RDEV -> $DEV0"; do
		ktap_skip "ATOMIC WRITE $t" "$why"
	done
	test_done
fi
py_checks "ATOMIC WRITE $DEV0 -> $RDEV (ibv_wr_atomic_write): values in place, completions, no-write region refused" \
	atomic_write.py "$DEV0" "$G0" "$RDEV" "$G1"
py_checks "ATOMIC WRITE $DEV0 -> $RDEV (ibv_post_send, IBV_WR_ATOMIC_WRITE)" \
	atomic_write.py "$DEV0" "$G0" "$RDEV" "$G1" --legacy
py_checks "ATOMIC WRITE $RDEV -> $DEV0 (ibv_wr_atomic_write)" \
	atomic_write.py "$RDEV" "$G1" "$DEV0" "$G0"
test_done
