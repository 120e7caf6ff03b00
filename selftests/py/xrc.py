#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""XRC: initiator QPs on DEV0 send to XRC SRQs behind target QPs on DEV1.

Usage: xrc.py DEV0 GID0 DEV1 GID1

DEV1 has XRC domain X with SRQ A (PD A, CQ A) and SRQ B (PD B, CQ B),
and domain Y with SRQ C; each target QP is in X.  Every transfer is
checked byte for byte.  Checks:
  * a 64 KiB SEND naming SRQ A lands in A's receive buffer, completes on
    CQ A (qp_num: the target QP) and nowhere else;
  * a SEND with immediate naming SRQ B lands in B's buffer, completes on
    CQ B with its immediate;
  * a second initiator/target pair in X sends into SRQ A as well: CQ A
    names the second target QP;
  * RDMA WRITE (1 MiB) into a region of PD A, READ back, fetch-and-add
    and compare-and-swap, all naming SRQ A (whose PD the keys are
    checked against);
  * the same region's key with SRQ B named (PD B): REM_ACCESS_ERR;
  * SRQ C (another domain) or an SRQ number nobody has: the target drops
    the requests (xrc_bad_srqn), the initiator's retries run out
    (RETRY_EXC_ERR), nothing lands;
  * posting a receive to an initiator QP fails.
Prints TAP lines; exits 1 if any check failed.
"""
import argparse
import os
import random
import sys
import time

import pyverbs.enums as e
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttrEx
from pyverbs.srq import SRQ, SrqInitAttrEx
from pyverbs.wr import RecvWR, SGE, SendWR
from pyverbs.xrcd import XRCD, XRCDInitAttr

import rclib
import taplib
from rclib import Dev, wc_str
from taplib import check

TMO = 60
MiB = 1 << 20


def xrcd(ctx):
    return XRCD(ctx, XRCDInitAttr(e.IBV_XRCD_INIT_ATTR_FD | e.IBV_XRCD_INIT_ATTR_OFLAGS, os.O_CREAT, -1))


def xrc_srq(ctx, dom, pd, cq, n=16):
    a = SrqInitAttrEx(max_wr=n, max_sge=1)
    a.srq_type = e.IBV_SRQT_XRC
    a.pd = pd
    a.xrcd = dom
    a.cq = cq
    a.comp_mask = (e.IBV_SRQ_INIT_ATTR_TYPE | e.IBV_SRQ_INIT_ATTR_PD | e.IBV_SRQ_INIT_ATTR_CQ |
                   e.IBV_SRQ_INIT_ATTR_XRCD)
    return SRQ(ctx, a)


class Pair:
    """An initiator QP on d0 connected to a target QP (domain `dom`) on d1."""

    def __init__(self, d0, d1, dom, cq0, timeout=14, retry_cnt=7):
        self.ini = QP(d0.ctx, QPInitAttrEx(qp_type=e.IBV_QPT_XRC_SEND, sq_sig_all=1, comp_mask=e.IBV_QP_INIT_ATTR_PD,
                                           pd=d0.pd, scq=cq0,
                                           cap=QPCap(max_send_wr=16, max_send_sge=1, max_recv_wr=0,
                                                     max_recv_sge=0)))
        self.tgt = QP(d1.ctx, QPInitAttrEx(qp_type=e.IBV_QPT_XRC_RECV, comp_mask=e.IBV_QP_INIT_ATTR_XRCD,
                                           xrcd=dom))
        mtu = min(d0.active_mtu(), d1.active_mtu())
        p0, p1 = random.getrandbits(24), random.getrandbits(24)
        for qp, src, dst, peer, sq, rq in ((self.tgt, d1, d0, self.ini, p1, p0), (self.ini, d0, d1, self.tgt, p0, p1)):
            a = QPAttr(port_num=1)
            a.pkey_index = 0
            a.qp_access_flags = rclib.ALL_ACCESS if qp is self.tgt else 0
            a.path_mtu = mtu
            a.dest_qp_num = peer.qp_num
            a.rq_psn, a.sq_psn = rq, sq
            a.max_rd_atomic = a.max_dest_rd_atomic = 16
            a.min_rnr_timer = 12
            a.timeout, a.retry_cnt, a.rnr_retry = timeout, retry_cnt, 7
            a.ah_attr = rclib.ah_to(src, dst)
            qp.to_rts(a)


def post(ini, op, srqn, mr=None, off=0, n=0, wr_id=1, imm=0, rkey=0, raddr=0, cmp=0, swap=0):
    sg = [SGE(mr.buf + off, n, mr.lkey)] if mr is not None else []
    wr = SendWR(wr_id=wr_id, opcode=op, num_sge=len(sg), sg=sg, send_flags=e.IBV_SEND_SIGNALED)
    if op in (e.IBV_WR_RDMA_WRITE, e.IBV_WR_RDMA_WRITE_WITH_IMM, e.IBV_WR_RDMA_READ):
        wr.set_wr_rdma(rkey, raddr)
    if op in (e.IBV_WR_ATOMIC_FETCH_AND_ADD, e.IBV_WR_ATOMIC_CMP_AND_SWP):
        wr.set_wr_atomic(rkey, raddr, cmp, swap)
    if imm:
        wr.imm_data = imm
    wr.set_qp_type_xrc(srqn)
    ini.post_send(wr)


def recv(srq, mr, n, wr_id):
    srq.post_recv(RecvWR(wr_id=wr_id, num_sge=1, sg=[SGE(mr.buf, n, mr.lkey)]))


def one(cq, what, status=e.IBV_WC_SUCCESS):
    """The next completion of cq, checked for `status`; None if none came."""
    got = rclib.poll(cq, 1, time.monotonic() + TMO)
    if not got:
        check(False, what, "no completion")
        return None
    wc = got[0]
    check(wc.status == status, what, wc_str(wc))
    return wc if wc.status == status else None


def main():
    ap = argparse.ArgumentParser()
    for a in ("dev0", "gid0", "dev1", "gid1"):
        ap.add_argument(a)
    args = ap.parse_args()
    d0, d1 = Dev(args.dev0, int(args.gid0)), Dev(args.dev1, int(args.gid1))
    x, y = xrcd(d1.ctx), xrcd(d1.ctx)
    pd_b = PD(d1.ctx)
    cq0, cq_a, cq_b = d0.cq(64), d1.cq(64), d1.cq(64)
    srq_a, srq_b = xrc_srq(d1.ctx, x, d1.pd, cq_a), xrc_srq(d1.ctx, x, pd_b, cq_b)
    srq_c = xrc_srq(d1.ctx, y, d1.pd, cq_a)
    na, nb, nc = srq_a.get_srq_num(), srq_b.get_srq_num(), srq_c.get_srq_num()
    check(len({na, nb, nc}) == 3 and 0 < min(na, nb, nc), "XRC SRQs have distinct numbers", f"{na} {nb} {nc}")
    pair = Pair(d0, d1, x, cq0)
    src = d0.mr(2 * MiB)
    rbuf_a, rbuf_b = d1.mr(128 * 1024), MR(pd_b, 128 * 1024, rclib.ALL_ACCESS)
    tq = pair.tgt.qp_num

    # SEND into SRQ A.
    data = os.urandom(64 * 1024)
    src.write(data, len(data))
    recv(srq_a, rbuf_a, 128 * 1024, 0xA1)
    recv(srq_b, rbuf_b, 128 * 1024, 0xB1)
    post(pair.ini, e.IBV_WR_SEND, na, src, 0, len(data), wr_id=1)
    one(cq0, "64 KiB SEND naming SRQ A completes at the initiator")
    wc = one(cq_a, "... and on CQ A")
    if wc is not None:
        check(wc.wr_id == 0xA1 and wc.byte_len == len(data) and wc.qp_num == tq and wc.opcode == e.IBV_WC_RECV,
              "... with SRQ A's WQE, the length and the target QP's number", wc_str(wc))
        check(rbuf_a.read(len(data), 0) == data, "... the bytes landed in SRQ A's buffer")
    check(not rclib.drain(cq_b, 0.2), "... nothing completed on CQ B")

    # SEND with immediate into SRQ B (PD B, CQ B): its posted WQE waits.
    data = os.urandom(4096)
    src.write(data, len(data))
    post(pair.ini, e.IBV_WR_SEND_WITH_IMM, nb, src, 0, len(data), wr_id=2, imm=0x12345678)
    one(cq0, "SEND with immediate naming SRQ B completes at the initiator")
    wc = one(cq_b, "... and on CQ B")
    if wc is not None:
        check(wc.wr_id == 0xB1 and wc.byte_len == len(data) and wc.wc_flags & e.IBV_WC_WITH_IMM and
              wc.imm_data == 0x12345678, "... with SRQ B's WQE and the immediate", wc_str(wc))
        check(rbuf_b.read(len(data), 0) == data, "... the bytes landed in SRQ B's buffer")
    check(not rclib.drain(cq_a, 0.2), "... nothing completed on CQ A")

    # A second pair in domain X shares SRQ A.
    pair2 = Pair(d0, d1, x, cq0)
    data = os.urandom(3000)
    src.write(data, len(data))
    recv(srq_a, rbuf_a, 128 * 1024, 0xA2)
    post(pair2.ini, e.IBV_WR_SEND, na, src, 0, len(data), wr_id=3)
    one(cq0, "a second initiator/target pair sends into SRQ A")
    wc = one(cq_a, "... and CQ A names the second target QP")
    if wc is not None:
        check(wc.wr_id == 0xA2 and wc.qp_num == pair2.tgt.qp_num and wc.byte_len == len(data),
              "... its WQE, its length", wc_str(wc))
        check(rbuf_a.read(len(data), 0) == data, "... the bytes landed")

    # One-sided operations into a region of PD A, naming SRQ A.
    mr_a = d1.mr(2 * MiB)
    mr_a.write(bytes(2 * MiB), 2 * MiB)
    data = os.urandom(MiB)
    src.write(data, MiB)
    post(pair.ini, e.IBV_WR_RDMA_WRITE, na, src, 0, MiB, wr_id=4, rkey=mr_a.rkey, raddr=mr_a.buf + 4096)
    one(cq0, "1 MiB RDMA WRITE naming SRQ A completes")
    check(mr_a.read(MiB, 4096) == data, "... the bytes landed in PD A's region")
    src.write(bytes(MiB), MiB)
    post(pair.ini, e.IBV_WR_RDMA_READ, na, src, MiB, MiB, wr_id=5, rkey=mr_a.rkey, raddr=mr_a.buf + 4096)
    one(cq0, "1 MiB RDMA READ back completes")
    check(src.read(MiB, MiB) == data, "... and read the same bytes")
    mr_a.write((1000).to_bytes(8, "little"), 8, 0)
    post(pair.ini, e.IBV_WR_ATOMIC_FETCH_AND_ADD, na, src, 0, 8, wr_id=6, rkey=mr_a.rkey, raddr=mr_a.buf, cmp=5)
    one(cq0, "fetch-and-add completes")
    post(pair.ini, e.IBV_WR_ATOMIC_CMP_AND_SWP, na, src, 8, 8, wr_id=7, rkey=mr_a.rkey, raddr=mr_a.buf, cmp=1005,
         swap=77)
    one(cq0, "compare-and-swap completes")
    old = (int.from_bytes(src.read(8, 0), "little"), int.from_bytes(src.read(8, 8), "little"))
    now = int.from_bytes(mr_a.read(8, 0), "little")
    check(old == (1000, 1005) and now == 77, "... original values 1000 and 1005 returned, 77 stored",
          f"{old} {now}")

    # PD A's key with SRQ B named: checked against PD B.
    post(pair.ini, e.IBV_WR_RDMA_WRITE, nb, src, 0, 64, wr_id=8, rkey=mr_a.rkey, raddr=mr_a.buf)
    one(cq0, "WRITE with PD A's key naming SRQ B (PD B): remote access error", e.IBV_WC_REM_ACCESS_ERR)
    check(mr_a.read(8, 0) == (77).to_bytes(8, "little"), "... nothing landed")

    # An SRQ of another domain, and a number nobody has: dropped.
    for srqn, what in ((nc, "SRQ C of another XRC domain"), (0xFFFFF0, "an SRQ number nobody has")):
        p = Pair(d0, d1, x, cq0, timeout=10, retry_cnt=1)
        recv(srq_c, rbuf_a, 128 * 1024, 0xC1)
        post(p.ini, e.IBV_WR_SEND, srqn, src, 0, 64, wr_id=9)
        one(cq0, f"SEND naming {what}: the initiator's retries run out", e.IBV_WC_RETRY_EXC_ERR)
        check(not rclib.drain(cq_a, 0.2), "... nothing completed on the target side")

    # An initiator has no receive queue.
    check(taplib.errno_of(lambda: pair.ini.post_recv(RecvWR(wr_id=1, num_sge=1, sg=[SGE(src.buf, 8, src.lkey)])))
          != 0, "post_recv on an XRC initiator QP fails")
    return taplib.finish()


if __name__ == "__main__":
    sys.exit(main())
