# SPDX-License-Identifier: GPL-2.0
"""Helpers for the RC traffic selftests (rc_xfer.py, rc_errors.py): open
two devices, connect RC queue pairs between them directly (both devices
are visible to one process: rdma netns mode "shared"), poll completion
queues against a wall-clock deadline, name completion statuses.

The packets of a QP pair between rroce0 (init_net, rr0) and rroce1 (netns
peer, rr1) still cross the veth: only the control path is shortcut.
"""
import time

import pyverbs.enums as e
from pyverbs.addr import AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr

_STATUS = ["SUCCESS", "LOC_LEN_ERR", "LOC_QP_OP_ERR", "LOC_EEC_OP_ERR", "LOC_PROT_ERR", "WR_FLUSH_ERR",
           "MW_BIND_ERR", "BAD_RESP_ERR", "LOC_ACCESS_ERR", "REM_INV_REQ_ERR", "REM_ACCESS_ERR", "REM_OP_ERR",
           "RETRY_EXC_ERR", "RNR_RETRY_EXC_ERR", "LOC_RDD_VIOL_ERR", "REM_INV_RD_REQ_ERR", "REM_ABORT_ERR",
           "INV_EECN_ERR", "INV_EEC_STATE_ERR", "FATAL_ERR", "RESP_TIMEOUT_ERR", "GENERAL_ERR"]
STATUS_NAME = {getattr(e, "IBV_WC_" + n): n for n in _STATUS}

_OPCODES = ["SEND", "RDMA_WRITE", "RDMA_READ", "COMP_SWAP", "FETCH_ADD", "BIND_MW", "LOCAL_INV", "ATOMIC_WRITE", "RECV",
            "RECV_RDMA_WITH_IMM"]
OPCODE_NAME = {getattr(e, "IBV_WC_" + n): n for n in _OPCODES}

_STATES = ["RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"]
STATE_NAME = {getattr(e, "IBV_QPS_" + n): n for n in _STATES}

MTU_ENUM = {256: e.IBV_MTU_256, 512: e.IBV_MTU_512, 1024: e.IBV_MTU_1024, 2048: e.IBV_MTU_2048,
            4096: e.IBV_MTU_4096}
MTU_BYTES = {v: k for k, v in MTU_ENUM.items()}

ALL_ACCESS = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ |
              e.IBV_ACCESS_REMOTE_ATOMIC)

MASK_INIT = e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_ACCESS_FLAGS
MASK_RTR = (e.IBV_QP_STATE | e.IBV_QP_AV | e.IBV_QP_PATH_MTU | e.IBV_QP_DEST_QPN | e.IBV_QP_RQ_PSN |
            e.IBV_QP_MAX_DEST_RD_ATOMIC | e.IBV_QP_MIN_RNR_TIMER)
MASK_RTS = (e.IBV_QP_STATE | e.IBV_QP_TIMEOUT | e.IBV_QP_RETRY_CNT | e.IBV_QP_RNR_RETRY | e.IBV_QP_SQ_PSN |
            e.IBV_QP_MAX_QP_RD_ATOMIC)


def status_str(s):
    return f"{STATUS_NAME.get(s, '?')}({s})"


def opcode_str(o):
    return f"{OPCODE_NAME.get(o, '?')}({o})"


def state_str(s):
    return f"{STATE_NAME.get(s, '?')}({s})"


def wc_str(wc):
    return (f"wr_id={wc.wr_id:#x} qp={wc.qp_num} status={status_str(wc.status)} "
            f"opcode={opcode_str(wc.opcode)} len={wc.byte_len} flags={wc.wc_flags:#x} imm={wc.imm_data:#x}")


class Dev:
    """One end: device context, PD, port attributes and a GID index."""

    def __init__(self, name, gid_index):
        self.name = name
        self.ctx = Context(name=name)
        self.pd = PD(self.ctx)
        self.gid_index = gid_index
        self.gid = self.ctx.query_gid(1, gid_index)
        self.port = self.ctx.query_port(1)
        self.dev_attr = self.ctx.query_device()

    def close(self):
        """Close the context and everything opened on it."""
        self.ctx.close()

    def active_mtu(self):
        return self.ctx.query_port(1).active_mtu

    def cq(self, n):
        return CQ(self.ctx, n)

    def mr(self, size, access=ALL_ACCESS):
        return MR(self.pd, size, access)

    def qp(self, scq, rcq, send_wr=16, recv_wr=16, sge=1, inline=0, qp_type=e.IBV_QPT_RC):
        cap = QPCap(max_send_wr=send_wr, max_recv_wr=recv_wr, max_send_sge=sge, max_recv_sge=sge,
                    max_inline_data=inline)
        return QP(self.pd, QPInitAttr(qp_type=qp_type, scq=scq, rcq=rcq, cap=cap))


def qp_attr(state, **fields):
    a = QPAttr(qp_state=state)
    for k, v in fields.items():
        setattr(a, k, v)
    return a


def ah_to(src, dst):
    """Address vector from src (a Dev) to dst (a Dev)."""
    gr = GlobalRoute(dgid=dst.gid, sgid_index=src.gid_index, hop_limit=64)
    return AHAttr(gr=gr, is_global=1, port_num=1)


def to_init(qp, access=ALL_ACCESS):
    qp.modify(qp_attr(e.IBV_QPS_INIT, port_num=1, pkey_index=0, qp_access_flags=access), MASK_INIT)


def to_rtr(qp, src, dst, dest_qpn, rq_psn, mtu, max_dest_rd_atomic=16, min_rnr_timer=12):
    a = qp_attr(e.IBV_QPS_RTR, path_mtu=mtu, dest_qp_num=dest_qpn, rq_psn=rq_psn,
                max_dest_rd_atomic=max_dest_rd_atomic, min_rnr_timer=min_rnr_timer, ah_attr=ah_to(src, dst))
    qp.modify(a, MASK_RTR)


def to_rts(qp, sq_psn, timeout=14, retry_cnt=7, rnr_retry=7, max_rd_atomic=16):
    a = qp_attr(e.IBV_QPS_RTS, timeout=timeout, retry_cnt=retry_cnt, rnr_retry=rnr_retry, sq_psn=sq_psn,
                max_rd_atomic=max_rd_atomic)
    qp.modify(a, MASK_RTS)


def connect(d0, qp0, psn0, d1, qp1, psn1, mtu, timeout=14, retry_cnt=7, rnr_retry=7, rd_atomic=16,
            access=ALL_ACCESS, min_rnr_timer=12):
    """Bring qp0 (on d0, sending from psn0) and qp1 (on d1, from psn1)
    to RTS, connected to each other."""
    to_init(qp0, access)
    to_init(qp1, access)
    to_rtr(qp0, d0, d1, qp1.qp_num, psn1, mtu, rd_atomic, min_rnr_timer)
    to_rtr(qp1, d1, d0, qp0.qp_num, psn0, mtu, rd_atomic, min_rnr_timer)
    to_rts(qp0, psn0, timeout, retry_cnt, rnr_retry, rd_atomic)
    to_rts(qp1, psn1, timeout, retry_cnt, rnr_retry, rd_atomic)


def qp_state(qp):
    attr, _ = qp.query(e.IBV_QP_STATE)
    return attr.qp_state


def poll(cq, want, deadline, idle_sleep=0.001):
    """Poll cq until `want` completions arrived or time.monotonic() passes
    deadline.  Returns the list of completions (possibly shorter)."""
    got = []
    while len(got) < want:
        n, wcs = cq.poll(want - len(got))
        if n:
            got.extend(wcs[:n])
            continue
        if time.monotonic() > deadline:
            break
        time.sleep(idle_sleep)
    return got


def drain(cq, settle=0.3):
    """Completions that show up within `settle` seconds (there should be
    none once everything expected was polled)."""
    extra = []
    end = time.monotonic() + settle
    while True:
        n, wcs = cq.poll(16)
        if n:
            extra.extend(wcs[:n])
            continue
        if time.monotonic() > end:
            return extra
        time.sleep(0.01)


def first_diff(a, b):
    """Offset of the first differing byte of two equal-length byte strings
    (binary search on slices), or -1; and how many bytes differ."""
    if a == b:
        return -1, 0
    lo, hi = 0, min(len(a), len(b))
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] != b[lo:mid]:
            hi = mid
        else:
            lo = mid
    ndiff = sum(1 for x, y in zip(a, b) if x != y) + abs(len(a) - len(b))
    return lo, ndiff
