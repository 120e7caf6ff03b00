#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Queue-pair control verbs through libibverbs and the rroce provider:
creation (RC/UC/UD) with capability write-back, the modify_qp state
machine with its errnos, query_qp, limits.

Usage: qp_verbs.py DEVICE GID_INDEX.  One "ok/not ok" line per check.
"""
import sys

import pyverbs.enums as e
from pyverbs.addr import AH, AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from taplib import check, errno_of, finish


ctx = Context(name=sys.argv[1])
gid_index = int(sys.argv[2])
pd = PD(ctx)
cq = CQ(ctx, 256)


def make_qp(qpt=e.IBV_QPT_RC, wr=100, sge=3, inline=64):
    cap = QPCap(max_send_wr=wr, max_recv_wr=wr, max_send_sge=sge, max_recv_sge=sge, max_inline_data=inline)
    return QP(pd, QPInitAttr(qp_type=qpt, scq=cq, rcq=cq, cap=cap))


qp = make_qp()
attr, init = qp.query(e.IBV_QP_STATE | e.IBV_QP_CAP)
check(qp.qp_state == e.IBV_QPS_RESET and attr.qp_state == e.IBV_QPS_RESET, "new RC QP is in RESET")
check(qp.qp_num >= 16 and qp.qp_num < (1 << 24), "QP number is a 24-bit number above the special QPs", f"{qp.qp_num}")
check(attr.cap.max_send_wr >= 100 and attr.cap.max_send_sge >= 3 and attr.cap.max_inline_data >= 64,
      "query_qp reports capabilities at least as large as requested",
      f"{attr.cap.max_send_wr}/{attr.cap.max_send_sge}/{attr.cap.max_inline_data}")

# RESET -> RTR directly is illegal.
a = QPAttr(qp_state=e.IBV_QPS_RTR)
check(errno_of(lambda: qp.modify(a, e.IBV_QP_STATE)) == 22, "RESET -> RTR -> EINVAL")
# RESET -> INIT needs PKEY_INDEX | PORT | ACCESS_FLAGS.
a = QPAttr(qp_state=e.IBV_QPS_INIT, port_num=1)
check(errno_of(lambda: qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_PORT)) == 22, "INIT without pkey/access -> EINVAL")
a.pkey_index = 0
a.qp_access_flags = e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ | e.IBV_ACCESS_LOCAL_WRITE
check(errno_of(lambda: qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_ACCESS_FLAGS)) == 0,
      "RESET -> INIT with pkey, port and access")
a.port_num = 2
check(errno_of(lambda: qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_ACCESS_FLAGS)) == 22,
      "INIT -> INIT on port 2 -> EINVAL")



def qp_attr(state, **fields):
    a = QPAttr(qp_state=state)
    for k, v in fields.items():
        setattr(a, k, v)
    return a


gr = GlobalRoute(dgid=ctx.query_gid(1, gid_index), sgid_index=gid_index)
ah = AHAttr(gr=gr, is_global=1, port_num=1)
rtr = qp_attr(e.IBV_QPS_RTR, path_mtu=e.IBV_MTU_1024, dest_qp_num=qp.qp_num, rq_psn=0x123456,
              max_dest_rd_atomic=4, min_rnr_timer=12, ah_attr=ah)
mask_rtr = (e.IBV_QP_STATE | e.IBV_QP_AV | e.IBV_QP_PATH_MTU | e.IBV_QP_DEST_QPN | e.IBV_QP_RQ_PSN |
            e.IBV_QP_MAX_DEST_RD_ATOMIC | e.IBV_QP_MIN_RNR_TIMER)
check(errno_of(lambda: qp.modify(rtr, mask_rtr & ~e.IBV_QP_AV)) == 22, "INIT -> RTR without an address vector -> EINVAL")
rtr.path_mtu = e.IBV_MTU_4096
check(errno_of(lambda: qp.modify(rtr, mask_rtr)) == 22, "path MTU above the port's active MTU -> EINVAL")
rtr.path_mtu = e.IBV_MTU_1024
check(errno_of(lambda: qp.modify(rtr, mask_rtr)) == 0, "INIT -> RTR (loopback AV, MTU 1024)")

rts = qp_attr(e.IBV_QPS_RTS, timeout=14, retry_cnt=7, rnr_retry=7, sq_psn=0xabcdef, max_rd_atomic=4)
mask_rts = (e.IBV_QP_STATE | e.IBV_QP_TIMEOUT | e.IBV_QP_RETRY_CNT | e.IBV_QP_RNR_RETRY | e.IBV_QP_SQ_PSN |
            e.IBV_QP_MAX_QP_RD_ATOMIC)
rts.retry_cnt = 8
check(errno_of(lambda: qp.modify(rts, mask_rts)) == 22, "retry_cnt 8 -> EINVAL")
rts.retry_cnt = 7
check(errno_of(lambda: qp.modify(rts, mask_rts)) == 0, "RTR -> RTS")
attr, _ = qp.query(e.IBV_QP_STATE | e.IBV_QP_SQ_PSN | e.IBV_QP_RQ_PSN | e.IBV_QP_DEST_QPN | e.IBV_QP_PATH_MTU |
                   e.IBV_QP_TIMEOUT | e.IBV_QP_AV)
check((attr.qp_state, attr.sq_psn, attr.rq_psn, attr.dest_qp_num, attr.path_mtu, attr.timeout) ==
      (e.IBV_QPS_RTS, 0xabcdef, 0x123456, qp.qp_num, e.IBV_MTU_1024, 14),
      "query_qp returns what modify_qp set",
      f"{attr.qp_state} {attr.sq_psn:#x} {attr.rq_psn:#x} {attr.dest_qp_num} {attr.path_mtu} {attr.timeout}")
check(errno_of(lambda: qp.modify(QPAttr(qp_state=e.IBV_QPS_ERR), e.IBV_QP_STATE)) == 0, "RTS -> ERR")
check(errno_of(lambda: qp.modify(QPAttr(qp_state=e.IBV_QPS_RESET), e.IBV_QP_STATE)) == 0, "ERR -> RESET")
qp.close()

ud = make_qp(e.IBV_QPT_UD)
a = QPAttr(qp_state=e.IBV_QPS_INIT, port_num=1)
a.pkey_index = 0
a.qkey = 0x11111111
check(errno_of(lambda: ud.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_QKEY)) == 0,
      "UD RESET -> INIT with a Q_Key")
ud.close()
uc = make_qp(e.IBV_QPT_UC)
check(uc.qp_num != 0, "UC QP created")
uc.close()

check(errno_of(lambda: make_qp(wr=ctx.query_device().max_qp_wr + 1)) == 22, "max_send_wr above max_qp_wr -> EINVAL")
check(errno_of(lambda: make_qp(sge=33)) == 22, "33 SGEs -> EINVAL")
check(errno_of(lambda: make_qp(inline=4096)) == 22, "4 KiB inline -> EINVAL")
# A queue of depth 0 is allowed: a send-only RC QP (max_recv_wr 0) and a
# receive-only UD QP (max_send_wr 0), as rxe, siw and mlx5 allow (EINVAL
# until 2026-12-07).  The reported capacity may be larger than asked.
for what, qpt, swr, rwr in (("RC QP with max_recv_wr 0", e.IBV_QPT_RC, 16, 0),
                            ("UD QP with max_send_wr 0", e.IBV_QPT_UD, 0, 16)):
    got = []
    rc = errno_of(lambda: got.append(QP(pd, QPInitAttr(qp_type=qpt, scq=cq, rcq=cq, cap=QPCap(
        max_send_wr=swr, max_recv_wr=rwr, max_send_sge=1, max_recv_sge=1)))))
    caps = got[0].query(e.IBV_QP_CAP)[1].cap if got else None
    check(rc == 0 and caps.max_send_wr >= swr and caps.max_recv_wr >= rwr, f"{what}: created",
          f"errno {rc}" + (f", caps {caps.max_send_wr}/{caps.max_recv_wr}" if caps else ""))
ahs = [AH(pd, attr=ah) for _ in range(100)]
check(len(ahs) == 100, "100 address handles to the loopback GID")
for a in ahs[:50]:
    a.close()
check(errno_of(lambda: AH(pd, attr=AHAttr(is_global=0, port_num=1))) != 0, "an AH without a GRH is refused on RoCE")

qps = [make_qp(wr=16, sge=1, inline=0) for _ in range(64)]
check(len({q.qp_num for q in qps}) == 64, "64 QPs get distinct numbers")
for q in qps[:32]:
    q.close()
# The rest is reclaimed at process exit.
finish()
