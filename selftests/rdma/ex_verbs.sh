#!/usr/bin/env bash
# Extended verbs through the provider (py/ex_verbs.py): CQs made by
# ibv_create_cq_ex polled with start_poll/next_poll/end_poll and the
# ibv_wc_read_* functions, an RC QP made by ibv_create_qp_ex posting with
# the ibv_wr_* API ($DEV0 -> $DEV1): SEND_WITH_IMM batches from SGE
# lists, inline SENDs, RDMA WRITE (+IMM) and READ, both atomics, every
# byte and completion field checked; wr_abort and failing batches post
# nothing; EOPNOTSUPP for timestamps, TSO, RDMA on UD.  On rxe both
# ends are on $DEV0 (it has no network namespace support).
# shellcheck source-path=SCRIPTDIR source=../lib.sh
. "$(dirname "$0")/../lib.sh"
test_init 2

desc="cq_ex polling and qp_ex posting with byte-verified data"
why=$(provider_unavailable)
[ -n "$why" ] || why=$(datapath_unavailable "$DEV0" "$IP0")
peer_gids
if [ -n "$why" ]; then
	ktap_skip "$desc" "$why"
else
	PY_CHECKS_TMO=$((300 * ${RROCE_TIMEOUT_SCALE:-1})) \
		py_checks "$desc ($DEV0 -> $RDEV)" ex_verbs.py "$DEV0" "$G0" "$RDEV" "$G1"
fi

test_done
