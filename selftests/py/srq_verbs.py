#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Shared receive queues (TAP checks), on DEV1 and over RC QPs DEV0 -> DEV1.

Usage: srq_verbs.py DEV0 GID0 DEV1 GID1

  - device limits: max_srq, max_srq_wr, max_srq_sge advertised;
  - create/query: capacities at least what was asked, limit 0; bad
    attributes (max_wr 0 or above max_srq_wr, max_sge above max_srq_sge)
    -> EINVAL, a srq_limit above max_wr ignored; modify_srq: limit above the
    capacity -> EINVAL, resizes of an empty SRQ (to 0 or above
    max_srq_wr -> EINVAL);
    the limit is armed and disarmed as query_srq shows;
  - post_srq_recv: too many SGEs -> EINVAL, one more than the capacity ->
    ENOMEM; ibv_post_recv on a QP with an SRQ -> EINVAL; UD QPs take an
    SRQ too;
  - traffic: two RC QPs on DEV1 share one SRQ; 8 receives posted, limit
    armed at 4, 5 multi-packet SENDs over both QPs: each lands in one
    SRQ buffer intact, with the receiving QP's number in its completion;
    IBV_EVENT_SRQ_LIMIT_REACHED arrives once and the limit is disarmed;
  - one QP moved to ERR flushes nothing of the SRQ (no completion) and
    raises IBV_EVENT_QP_LAST_WQE_REACHED, the other QP keeps receiving into the SRQ; after destroying a QP its
    SRQ's WQEs are still used by the remaining one;
  - resize with WQEs posted: shrinking below them or below the armed
    limit -> EINVAL; 16 -> 64 with 12 posted, 52 more posted, 64 SENDs land
    in posting order, intact; the empty SRQ shrunk to 4 holds exactly
    its capacity.
"""
import errno
import os
import select
import sys
import time

import pyverbs.enums as e
from pyverbs.pyverbs_error import PyverbsError
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

import rclib
from rclib import Dev, wc_str
from taplib import check, errno_of, finish

POLL_S = 60  # seconds a completion may take (TCG is slow)
BUF = 4096  # bytes per receive buffer
MSG = 2500  # bytes per SEND: 3 packets at path MTU 1024


def event_fds():
    """The async event fds ([infinibandevent]) this process holds."""
    fds = set()
    for n in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{n}") == "anon_inode:[infinibandevent]":
                fds.add(int(n))
        except OSError:
            pass
    return fds


def wait_async(ctx, fd, timeout):
    """The next async event type of ctx within timeout seconds, or None."""
    r, _, _ = select.select([fd], [], [], timeout)
    if not r:
        return None
    ev = ctx.get_async_event()
    t = ev.event_type
    ev.ack()
    return t


def make_srq(pd, max_wr, max_sge=1, limit=0):
    return SRQ(pd, SrqInitAttr(SrqAttr(max_wr=max_wr, max_sge=max_sge, srq_limit=limit)))


def control(d):
    a = d.dev_attr
    check(a.max_srq > 0 and a.max_srq_wr >= 1024 and a.max_srq_sge >= 1,
          f"{d.name} advertises SRQs (max_srq {a.max_srq}, max_srq_wr {a.max_srq_wr}, "
          f"max_srq_sge {a.max_srq_sge})")
    # What the device does, said in device_cap_flags (until 2026-12-07
    # none of these was: rdma-core's test_resize_srq skipped).
    for name in ("SRQ_RESIZE", "RC_RNR_NAK_GEN", "SYS_IMAGE_GUID", "PORT_ACTIVE_EVENT"):
        bit = getattr(e, "IBV_DEVICE_" + name)
        check(a.device_cap_flags & bit, f"device_cap_flags has IBV_DEVICE_{name}", f"{a.device_cap_flags:#x}")
    srq = make_srq(d.pd, 16, 2)
    q = srq.query()
    check(q.max_wr >= 16 and q.max_sge >= 2 and q.srq_limit == 0, "create_srq(16, 2): query gives >= 16 WRs, "
          ">= 2 SGEs, limit 0", f"max_wr {q.max_wr} max_sge {q.max_sge} limit {q.srq_limit}")
    for what, wr, sge, lim in (("max_wr 0", 0, 1, 0), ("max_wr max_srq_wr + 1", a.max_srq_wr + 1, 1, 0),
                               ("max_sge max_srq_sge + 1", 16, a.max_srq_sge + 1, 0)):
        err = errno_of(lambda: make_srq(d.pd, wr, sge, lim))
        check(err == errno.EINVAL, f"create_srq with {what} -> EINVAL", f"errno {err}")
    # The limit given at creation is ignored (ibv_create_srq(3), as
    # rdma_rxe and mlx5; until 2026-12-07 one above max_wr gave EINVAL).
    err = errno_of(lambda: make_srq(d.pd, 16, 1, 17).close())
    check(err == 0, "create_srq with srq_limit above max_wr: created (the limit is ignored)", f"errno {err}")
    err = errno_of(lambda: srq.modify(SrqAttr(srq_limit=q.max_wr + 1), e.IBV_SRQ_LIMIT))
    check(err == errno.EINVAL, "modify_srq limit above the capacity -> EINVAL", f"errno {err}")
    err = errno_of(lambda: srq.modify(SrqAttr(max_wr=2 * q.max_wr), e.IBV_SRQ_MAX_WR))
    q2 = srq.query()
    check(err == 0 and q2.max_wr >= 2 * q.max_wr, "modify_srq resize of an empty SRQ to twice its size",
          f"errno {err}, max_wr {q2.max_wr}")
    for what, wr in (("0", 0), ("max_srq_wr + 1", a.max_srq_wr + 1)):
        err = errno_of(lambda: srq.modify(SrqAttr(max_wr=wr), e.IBV_SRQ_MAX_WR))
        check(err == errno.EINVAL and srq.query().max_wr == q2.max_wr, f"modify_srq resize to {what} -> EINVAL",
              f"errno {err}")
    q = q2
    err = errno_of(lambda: srq.modify(SrqAttr(srq_limit=4), e.IBV_SRQ_LIMIT))
    lim = srq.query().srq_limit
    check(err == 0 and lim == 4, "modify_srq limit 4: query shows 4", f"errno {err}, limit {lim}")
    err = errno_of(lambda: srq.modify(SrqAttr(srq_limit=0), e.IBV_SRQ_LIMIT))
    lim = srq.query().srq_limit
    check(err == 0 and lim == 0, "modify_srq limit 0 disarms", f"errno {err}, limit {lim}")

    mr = d.mr(BUF)
    sges = [SGE(mr.buf, 8, mr.lkey)] * (q.max_sge + 1)
    err = errno_of(lambda: srq.post_recv(RecvWR(wr_id=1, num_sge=len(sges), sg=sges)))
    check(err == errno.EINVAL, f"post_srq_recv with {len(sges)} SGEs (max {q.max_sge}) -> EINVAL", f"errno {err}")
    posted, err = 0, 0
    for i in range(q.max_wr + 1):
        err = errno_of(lambda: srq.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[SGE(mr.buf, 8, mr.lkey)])))
        if err:
            break
        posted += 1
    check(posted == q.max_wr and err == errno.ENOMEM, f"post_srq_recv: {q.max_wr} fit, one more -> ENOMEM",
          f"{posted} posted, then errno {err}")

    cq = d.cq(16)
    cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
    ok = True
    try:
        rc = QP(d.pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, srq=srq, cap=cap))
        ud = QP(d.pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=cq, rcq=cq, srq=srq, cap=cap))
    except PyverbsError as ex:
        ok = False
        check(False, "RC and UD QPs with the SRQ", str(ex))
    if ok:
        check(True, "RC and UD QPs with the SRQ")
        rclib.to_init(rc)
        err = errno_of(lambda: rc.post_recv(RecvWR(wr_id=1, num_sge=1, sg=[SGE(mr.buf, 8, mr.lkey)])))
        check(err == errno.EINVAL, "ibv_post_recv on a QP with an SRQ -> EINVAL", f"errno {err}")
        for o in (rc, ud):
            o.close()
    for o in (srq, mr, cq):
        o.close()


def send(qp, mr, i, payload):
    mr.write(payload, len(payload), i * BUF)
    qp.post_send(SendWR(wr_id=0x500 + i, opcode=e.IBV_WR_SEND, num_sge=1,
                        sg=[SGE(mr.buf + i * BUF, len(payload), mr.lkey)], send_flags=e.IBV_SEND_SIGNALED))


def payload_of(i):
    return bytes((i * 37 + k) & 0xFF for k in range(MSG))


class Traffic:
    def __init__(self, d0, d1, evfd):
        self.d0, self.d1, self.evfd = d0, d1, evfd
        self.scq = d0.cq(64)
        self.rcq = d1.cq(64)
        self.srq = make_srq(d1.pd, 32)
        cap = QPCap(max_send_wr=16, max_recv_wr=1, max_send_sge=1, max_recv_sge=1)
        self.tx = [d0.qp(self.scq, self.scq, send_wr=16, recv_wr=1) for _ in range(2)]
        self.rx = [QP(d1.pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.rcq, rcq=self.rcq, srq=self.srq, cap=cap))
                   for _ in range(2)]
        self.smr = d0.mr(32 * BUF)
        self.rmr = d1.mr(32 * BUF)
        mtu = min(d0.active_mtu(), d1.active_mtu(), e.IBV_MTU_1024)
        for k in range(2):
            rclib.connect(d0, self.tx[k], 0x100 * (k + 1), d1, self.rx[k], 0x1000 * (k + 1), mtu)
        self.next_buf = 0
        self.next_msg = 0

    def post_recvs(self, n):
        for _ in range(n):
            b = self.next_buf % 32
            self.rmr.write(b"\0" * BUF, BUF, b * BUF)
            self.srq.post_recv(RecvWR(wr_id=0x100 + b, num_sge=1, sg=[SGE(self.rmr.buf + b * BUF, BUF,
                                                                            self.rmr.lkey)]))
            self.next_buf += 1

    def round(self, which, what):
        """One SEND per entry of `which` (QP index); check the receive
        completions: every message once, intact, with the right QP."""
        sent = {}
        for k in which:
            i = self.next_msg
            self.next_msg += 1
            sent[payload_of(i)] = (i, self.rx[k].qp_num)
            send(self.tx[k], self.smr, i % 32, payload_of(i))
        s = rclib.poll(self.scq, len(which), time.monotonic() + POLL_S)
        bad = [w for w in s if w.status != e.IBV_WC_SUCCESS]
        check(len(s) == len(which) and not bad, f"{what}: {len(which)} SENDs complete",
              f"{len(s)} completions; " + "; ".join(wc_str(w) for w in bad[:2]))
        r = rclib.poll(self.rcq, len(which), time.monotonic() + POLL_S)
        problems = []
        for w in r:
            if w.status != e.IBV_WC_SUCCESS or w.opcode != e.IBV_WC_RECV or w.byte_len != MSG:
                problems.append(wc_str(w))
                continue
            data = self.rmr.read(MSG, (w.wr_id - 0x100) * BUF)
            who = sent.pop(data, None)
            if who is None:
                problems.append(f"{wc_str(w)}: buffer holds no message sent (or one twice)")
            elif who[1] != w.qp_num:
                problems.append(f"{wc_str(w)}: message {who[0]} was sent to QP {who[1]}")
        check(len(r) == len(which) and not problems and not sent,
              f"{what}: every message once, intact, in an SRQ buffer, completed on its QP",
              f"{len(r)} receive completions; {'; '.join(problems[:3])}; {len(sent)} missing")
        return not problems

    def close(self):
        for o in self.tx + self.rx + [self.srq, self.smr, self.rmr, self.scq, self.rcq]:
            o.close()


def traffic(d0, d1, evfd):
    t = Traffic(d0, d1, evfd)
    t.post_recvs(8)
    t.srq.modify(SrqAttr(srq_limit=4), e.IBV_SRQ_LIMIT)
    t.round([0, 1, 0, 1, 0], "2 RC QPs on one SRQ, 8 posted, limit 4")
    ev = wait_async(d1.ctx, evfd, 10) if evfd is not None else "no fd"
    check(ev == e.IBV_EVENT_SRQ_LIMIT_REACHED, "IBV_EVENT_SRQ_LIMIT_REACHED once fewer than 4 are posted",
          f"got {ev!r}")
    lim = t.srq.query().srq_limit
    check(lim == 0, "the limit is disarmed after the event", f"limit {lim}")
    t.round([1, 0, 1], "3 more (SRQ now empty)")
    ev = wait_async(d1.ctx, evfd, 1) if evfd is not None else None
    check(ev is None, "no second limit event while disarmed", f"got {ev!r}")

    # One QP to ERR: nothing of the SRQ is flushed, the other QP goes on.
    t.post_recvs(6)
    t.rx[0].modify(rclib.qp_attr(e.IBV_QPS_ERR), e.IBV_QP_STATE)
    extra = rclib.drain(t.rcq, 0.5)
    check(not extra, f"QP {t.rx[0].qp_num} to ERR: no completion (no receive in progress, SRQ not flushed)",
          "; ".join(wc_str(w) for w in extra[:4]))
    ev = wait_async(d1.ctx, evfd, 10) if evfd is not None else "no fd"
    check(ev == e.IBV_EVENT_QP_LAST_WQE_REACHED, "IBV_EVENT_QP_LAST_WQE_REACHED for the QP on the SRQ moved to ERR",
          f"got {ev!r}")
    t.round([1, 1, 1, 1], "the other QP receives into the same SRQ")
    t.rx[0].close()
    t.round([1, 1], "after destroying the QP in ERR: its SRQ's WQEs are still there")
    extra = rclib.drain(t.rcq, 0.3)
    check(not extra, "no stray receive completions", "; ".join(wc_str(w) for w in extra[:4]))
    t.rx = t.rx[1:]
    t.close()


def resize(d0, d1):
    """An SRQ resized with WQEs posted: they move to the new ring in
    order; shrinking below what is posted, or below the armed limit, is
    refused and changes nothing."""
    n_bufs = 64
    scq, rcq = d0.cq(n_bufs), d1.cq(n_bufs)
    srq = make_srq(d1.pd, 16)
    cap = QPCap(max_send_wr=n_bufs, max_recv_wr=1, max_send_sge=1, max_recv_sge=1)
    tx = d0.qp(scq, scq, send_wr=n_bufs, recv_wr=1)
    rx = QP(d1.pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=rcq, rcq=rcq, srq=srq, cap=cap))
    smr, rmr = d0.mr(n_bufs * BUF), d1.mr(n_bufs * BUF)
    rclib.connect(d0, tx, 0x300, d1, rx, 0x400, min(d0.active_mtu(), d1.active_mtu(), e.IBV_MTU_1024))

    def post(first, n):
        for b in range(first, first + n):
            srq.post_recv(RecvWR(wr_id=0x700 + b, num_sge=1, sg=[SGE(rmr.buf + b * BUF, BUF, rmr.lkey)]))

    post(0, 12)
    err = errno_of(lambda: srq.modify(SrqAttr(max_wr=8), e.IBV_SRQ_MAX_WR))
    check(err == errno.EINVAL and srq.query().max_wr >= 16, "resize to 8 with 12 posted -> EINVAL, size kept",
          f"errno {err}")
    srq.modify(SrqAttr(srq_limit=12), e.IBV_SRQ_LIMIT)
    err = errno_of(lambda: srq.modify(SrqAttr(max_wr=8), e.IBV_SRQ_MAX_WR))
    check(err == errno.EINVAL, "resize below the armed limit -> EINVAL", f"errno {err}")
    srq.modify(SrqAttr(srq_limit=0), e.IBV_SRQ_LIMIT)
    err = errno_of(lambda: srq.modify(SrqAttr(max_wr=n_bufs), e.IBV_SRQ_MAX_WR))
    q = srq.query()
    check(err == 0 and q.max_wr >= n_bufs, f"resize 16 -> {n_bufs} with 12 posted", f"errno {err}, max_wr {q.max_wr}")
    post(12, n_bufs - 12)
    for i in range(n_bufs):
        send(tx, smr, i, payload_of(i))
    s = rclib.poll(scq, n_bufs, time.monotonic() + POLL_S * 2)
    r = rclib.poll(rcq, n_bufs, time.monotonic() + POLL_S * 2)
    bad = [wc_str(w) for w in s + r if w.status != e.IBV_WC_SUCCESS]
    order = [w.wr_id - 0x700 for w in r]
    data_ok = all(rmr.read(MSG, b * BUF) == payload_of(b) for b in range(n_bufs))
    check(len(s) == n_bufs and len(r) == n_bufs and not bad and order == list(range(n_bufs)) and data_ok,
          f"{n_bufs} SENDs land in the 12 WQEs posted before the resize and the {n_bufs - 12} after, in order, "
          "intact", f"{len(s)} send / {len(r)} receive completions, {bad[:2]}, order {order[:16]}, data {data_ok}")
    err = errno_of(lambda: srq.modify(SrqAttr(max_wr=4), e.IBV_SRQ_MAX_WR))
    q = srq.query()
    posted, perr = 0, 0
    for b in range(q.max_wr + 1):
        perr = errno_of(lambda: srq.post_recv(RecvWR(wr_id=0x700 + b, num_sge=1,
                                                     sg=[SGE(rmr.buf + b * BUF, BUF, rmr.lkey)])))
        if perr:
            break
        posted += 1
    check(err == 0 and 4 <= q.max_wr < n_bufs and posted == q.max_wr and perr == errno.ENOMEM,
          "shrink the empty SRQ to 4: that many fit, one more -> ENOMEM",
          f"errno {err}, max_wr {q.max_wr}, {posted} posted, then errno {perr}")
    for o in (tx, rx, srq, smr, rmr, scq, rcq):
        o.close()


def main():
    if len(sys.argv) != 5:
        sys.exit(f"usage: {sys.argv[0]} DEV0 GID0 DEV1 GID1")
    d0 = Dev(sys.argv[1], int(sys.argv[2]))
    before = event_fds()
    d1 = Dev(sys.argv[3], int(sys.argv[4]))
    new = event_fds() - before
    evfd = new.pop() if len(new) == 1 else None
    control(d1)
    traffic(d0, d1, evfd)
    resize(d0, d1)
    finish()


if __name__ == "__main__":
    main()
