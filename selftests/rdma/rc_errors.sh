#!/usr/bin/env bash
# RC error handling with py/rc_errors.py, one subtest per case, QP pairs
# between $DEV0 (requester) and $DEV1 (responder, netns peer) connected
# directly in one process:
#   - bad modify_qp input: RESET -> RTS, RTR without dest_qp_num or path
#     MTU, invalid path MTUs, max_rd_atomic / max_dest_rd_atomic above the
#     device maximum -> EINVAL (ib_core and the drivers' errno), state kept
#   - posting sends in RESET/INIT/RTR -> EINVAL
#   - SEND with a bad lkey -> IBV_WC_LOC_PROT_ERR; RDMA WRITE with a bad
#     rkey, past the end of the remote MR, or to an MR without REMOTE_WRITE,
#     and RDMA READ from an MR without REMOTE_READ -> IBV_WC_REM_ACCESS_ERR;
#     each time the QP goes to ERR and the WRs behind are flushed
#     (IBV_WC_WR_FLUSH_ERR), the responder's memory is untouched
#   - SEND larger than the receive buffer -> IBV_WC_REM_INV_REQ_ERR on the
#     requester, LOC_LEN_ERR (as mlx5; REM_INV_REQ_ERR accepted) on the
#     responder's receive, both QPs in ERR
#   - rnr_retry 0 without a receive -> IBV_WC_RNR_RETRY_EXC_ERR; no ACK
#     (unknown destination QP) -> IBV_WC_RETRY_EXC_ERR with retry_cnt 2, but
#     never with retry_cnt 7 (7 = infinite: README, as rxe; IBA makes only
#     rnr_retry 7 infinite)
#   - atomics: FETCH_AND_ADD and CMP_AND_SWP return the original value and
#     leave the right result (wrap-around, compare mismatch); at an address
#     that is not 8-byte aligned -> IBV_WC_REM_INV_REQ_ERR (NAK invalid
#     request), remote memory unchanged, the WRs behind flushed
#   - isolation (IBA 10.6.3): an lkey of another PD of the same context
#     (SEND source, READ destination) -> LOC_PROT_ERR; an rkey of an MR in
#     another PD than the responder QP's (WRITE, READ) -> REM_ACCESS_ERR;
#     keys of deregistered MRs -> LOC_PROT_ERR / REM_ACCESS_ERR, and a new
#     MR does not reuse the key; the other PD's memory unchanged
# and the matching hw_counters.  After each case a fresh QP pair on the same
# devices must move data intact (the device keeps working).
#
# On rxe (RROCE_TYPE=rxe; both ends on $DEV0, it has no namespace support;
# its counters have other names and are not checked) 6.12 deviates from the
# IBA / mlx5 behaviour expected here: it accepts path_mtu 0 and any
# max_dest_rd_atomic; WRs refused by ibv_post_send in INIT/RTR come back
# flushed when the QP goes to ERR; a bad lkey completes with WR_FLUSH_ERR
# instead of LOC_PROT_ERR; a too-long SEND gives REM_OP_ERR (requester) and
# LOC_QP_OP_ERR (responder).  Those five cases fail there.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
. "$(dirname "$0")/../lib.sh"

# name|description
CASES=(
	"reset_to_rts|modify_qp RESET -> RTS (and INIT -> RTS) -> EINVAL"
	"rtr_no_dest_qpn|modify_qp INIT -> RTR without IBV_QP_DEST_QPN -> EINVAL"
	"rtr_no_path_mtu|modify_qp INIT -> RTR without IBV_QP_PATH_MTU -> EINVAL"
	"bad_path_mtu|modify_qp path_mtu 0/6/7/255 or above the active MTU -> EINVAL"
	"rd_atomic_above_max|max_dest_rd_atomic / max_rd_atomic above the device maximum, timeout 32 -> EINVAL"
	"post_send_init|ibv_post_send in RESET, INIT and RTR -> EINVAL; ibv_post_recv in INIT allowed"
	"bad_lkey|SEND with a bad lkey -> LOC_PROT_ERR, QP in ERR, later WRs flushed"
	"write_bad_rkey|RDMA WRITE with a bad rkey -> REM_ACCESS_ERR, QP in ERR, later WRs flushed"
	"write_beyond_mr|RDMA WRITE past the end of the remote MR -> REM_ACCESS_ERR, nothing written"
	"write_no_remote_write|RDMA WRITE to an MR without REMOTE_WRITE -> REM_ACCESS_ERR"
	"read_no_remote_read|RDMA READ from an MR without REMOTE_READ -> REM_ACCESS_ERR"
	"qp_no_remote_write|WRITE_WITH_IMM of 0 bytes to a QP without REMOTE_WRITE -> REM_INV_REQ_ERR, no receive taken"
	"qp_no_remote_read|READ from a QP without REMOTE_READ -> REM_INV_REQ_ERR"
	"send_too_long|SEND larger than the receive buffer -> REM_INV_REQ_ERR / receive error, both QPs in ERR"
	"read_then_bad_write|RDMA READ 1 MiB, then a WRITE with a bad rkey: READ SUCCESS (data intact), WRITE REM_ACCESS_ERR, the rest flushed"
	"rnr_retry_exceeded|SEND without a receive, rnr_retry 0 -> RNR_RETRY_EXC_ERR"
	"retry_exceeded|no ACK (unknown destination QP), retry_cnt 2 -> RETRY_EXC_ERR"
	"retry_cnt_7_infinite|no ACK, retry_cnt 7: keeps retrying (7 = infinite, as documented), ERR flushes"
	"zero_length_rkey0|zero-length RDMA WRITE, READ and WRITE_WITH_IMM with rkey 0 / address 0 succeed, QPs stay RTS"
	"atomic_results|ATOMIC FETCH_AND_ADD / CMP_AND_SWP (match and mismatch): returned and remote values"
	"atomic_misaligned_fetch_add|ATOMIC FETCH_AND_ADD at a misaligned address -> REM_INV_REQ_ERR, nothing changed"
	"atomic_misaligned_cmp_swap|ATOMIC CMP_AND_SWP at a misaligned address -> REM_INV_REQ_ERR, nothing changed"
	"lkey_other_pd|SEND from / READ into an MR of another PD of the same context -> LOC_PROT_ERR, MR unchanged"
	"rkey_other_pd|RDMA WRITE / READ with the rkey of an MR in another PD than the responder QP's -> REM_ACCESS_ERR"
	"dereg_lkey|SEND with the lkey of a deregistered MR -> LOC_PROT_ERR"
	"dereg_rkey|RDMA WRITE with the rkey of a deregistered MR -> REM_ACCESS_ERR; a new MR gets a different key"
)
test_init $((${#CASES[@]} + 1))

why=$(provider_unavailable)
[ -n "$why" ] || why=$(datapath_unavailable "$DEV0" "$IP0")
peer_gids
[ "$RROCE_TYPE" = rxe ] && diag "$RROCE_TYPE has no network namespace support: both ends on $DEV0"

# One Python process runs the cases one after the other (each with its own
# device contexts); each case gets at most this long (a hang is a failure,
# not a stuck test).
PY_CHECKS_TMO=$((150 * ${RROCE_TIMEOUT_SCALE:-1}))
if [ -n "$why" ]; then
	for c in "${CASES[@]}"; do ktap_skip "${c#*|}" "$why"; done
else
	py_cases rc_errors.py --limit "$PY_CHECKS_TMO" "$DEV0" "$G0" "$RDEV" "$G1" -- "${CASES[@]}"
fi

test_done
