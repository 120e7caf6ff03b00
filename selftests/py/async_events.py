#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Affiliated QP async events through ibv_get_async_event (TAP checks).

Usage: async_events.py DEV0 GID0 DEV1 GID1 [IF0].  RC QPs DEV0 -> DEV1;
the QP events are read from DEV1's context (the responder):

  - IBV_EVENT_COMM_EST: a SEND reaches a QP still in RTR; it is received;
  - IBV_EVENT_QP_ACCESS_ERR: an RDMA WRITE with a bad rkey (the requester
    sees REM_ACCESS_ERR, the responder QP is in ERR);
  - IBV_EVENT_QP_REQ_ERR: a misaligned FETCH_AND_ADD (REM_INV_REQ_ERR);
  - no event for a good transfer, and none for a QP the user moves to ERR
    (without an SRQ; SRQ QPs get LAST_WQE_REACHED, see srq_verbs.py);
  - SQD: RTS -> SQD (en_sqd_async_notify) with a SEND waiting in RNR: the
    SEND completes, then IBV_EVENT_SQ_DRAINED; a SEND posted in SQD waits
    for RTS; SQD -> RTS refused (EINVAL) while draining, then allowed;
  - modify_qp to RESET removes that QP's unpolled completions from its CQ
    (and only those), as hardware providers do;
  - with IF0 (DEV0's netdev): `ip link set IF0 down` -> IBV_EVENT_PORT_ERR
    on DEV0's context, `up` -> IBV_EVENT_PORT_ACTIVE.
"""
import errno
import subprocess
import sys
import time

import pyverbs.enums as e
from pyverbs.wr import SGE, RecvWR, SendWR

import rclib
from rclib import Dev, poll, status_str
from srq_verbs import event_fds, wait_async
from taplib import check, errno_of, finish

EV_NAME = {getattr(e, n): n for n in dir(e) if n.startswith("IBV_EVENT_")}


def ev_str(ev):
    return EV_NAME.get(ev, repr(ev))


def main():
    before0 = event_fds()
    d0 = Dev(sys.argv[1], int(sys.argv[2]))
    fds0 = event_fds() - before0
    before = event_fds()
    d1 = Dev(sys.argv[3], int(sys.argv[4]))
    new = event_fds() - before
    if len(new) != 1:
        check(False, "found DEV1's async event fd", f"candidates {new}")
        finish()
    evfd = new.pop()
    mtu = min(d0.active_mtu(), d1.active_mtu())
    smr, rmr = d0.mr(65536), d1.mr(65536)

    def pair(rts=True):
        cq0, cq1 = d0.cq(32), d1.cq(32)
        qp0, qp1 = d0.qp(cq0, cq0), d1.qp(cq1, cq1)
        rclib.to_init(qp0)
        rclib.to_init(qp1)
        rclib.to_rtr(qp0, d0, d1, qp1.qp_num, 300, mtu)
        rclib.to_rtr(qp1, d1, d0, qp0.qp_num, 100, mtu)
        rclib.to_rts(qp0, 100, timeout=12, retry_cnt=2, rnr_retry=2)
        if rts:
            rclib.to_rts(qp1, 300)
        return cq0, cq1, qp0, qp1

    def send_one(p, length=4096):
        cq0, cq1, qp0, qp1 = p
        qp1.post_recv(RecvWR(wr_id=5, num_sge=1, sg=[SGE(rmr.buf, length, rmr.lkey)]))
        smr.write(bytes(range(256)) * (length // 256), length, 0)
        qp0.post_send(SendWR(wr_id=6, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(smr.buf, length, smr.lkey)],
                             send_flags=e.IBV_SEND_SIGNALED))
        s = poll(cq0, 1, time.monotonic() + 30)
        r = poll(cq1, 1, time.monotonic() + 30)
        return s, r

    # Good traffic between two QPs in RTS: no event.
    p = pair()
    s, r = send_one(p)
    check(len(s) == 1 and s[0].status == 0 and len(r) == 1 and r[0].status == 0, "SEND between RTS QPs completes")
    ev = wait_async(d1.ctx, evfd, 0.5)
    check(ev is None, "no async event for good traffic in RTS", f"got {ev_str(ev)}")

    # COMM_EST: the responder is still in RTR.
    p = pair(rts=False)
    s, r = send_one(p)
    check(len(r) == 1 and r[0].status == 0 and rmr.read(4096, 0) == bytes(range(256)) * 16,
          "a SEND to a QP in RTR is received intact", f"{[rclib.wc_str(w) for w in s + r]}")
    ev = wait_async(d1.ctx, evfd, 10)
    check(ev == e.IBV_EVENT_COMM_EST, "IBV_EVENT_COMM_EST on the RTR QP's first packet", f"got {ev_str(ev)}")
    s, r = send_one(p)
    ev = wait_async(d1.ctx, evfd, 0.5)
    check(len(r) == 1 and ev is None, "only once: no event for the second SEND", f"got {ev_str(ev)}")

    # Access error at the responder.
    cq0, cq1, qp0, qp1 = pair()
    wr = SendWR(wr_id=7, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(smr.buf, 64, smr.lkey)],
                send_flags=e.IBV_SEND_SIGNALED)
    wr.set_wr_rdma(rmr.rkey ^ 0x5a5a00, rmr.buf)
    qp0.post_send(wr)
    s = poll(cq0, 1, time.monotonic() + 30)
    check(len(s) == 1 and s[0].status == e.IBV_WC_REM_ACCESS_ERR, "WRITE with a bad rkey -> REM_ACCESS_ERR",
          status_str(s[0].status) if s else "no completion")
    ev = wait_async(d1.ctx, evfd, 10)
    check(ev == e.IBV_EVENT_QP_ACCESS_ERR, "responder: IBV_EVENT_QP_ACCESS_ERR", f"got {ev_str(ev)}")
    st = rclib.qp_state(qp1)
    check(st == e.IBV_QPS_ERR, "responder QP in ERR", rclib.state_str(st))

    # Invalid request at the responder.
    cq0, cq1, qp0, qp1 = pair()
    wr = SendWR(wr_id=8, opcode=e.IBV_WR_ATOMIC_FETCH_AND_ADD, num_sge=1, sg=[SGE(smr.buf, 8, smr.lkey)],
                send_flags=e.IBV_SEND_SIGNALED)
    wr.set_wr_atomic(rmr.rkey, rmr.buf + 4, 1, 0)
    qp0.post_send(wr)
    s = poll(cq0, 1, time.monotonic() + 30)
    check(len(s) == 1 and s[0].status == e.IBV_WC_REM_INV_REQ_ERR,
          "FETCH_AND_ADD at a misaligned address -> REM_INV_REQ_ERR",
          status_str(s[0].status) if s else "no completion")
    ev = wait_async(d1.ctx, evfd, 10)
    check(ev == e.IBV_EVENT_QP_REQ_ERR, "responder: IBV_EVENT_QP_REQ_ERR", f"got {ev_str(ev)}")

    # A user-requested ERR without an SRQ raises nothing.
    cq0, cq1, qp0, qp1 = pair()
    qp1.modify(rclib.qp_attr(e.IBV_QPS_ERR), e.IBV_QP_STATE)
    ev = wait_async(d1.ctx, evfd, 0.5)
    check(ev is None, "modify to ERR (no SRQ): no event", f"got {ev_str(ev)}")

    # The device still works.
    p = pair()
    s, r = send_one(p, 65536)
    check(len(r) == 1 and r[0].status == 0 and r[0].byte_len == 65536, "a fresh pair still moves 64 KiB")

    # SQD: the QP completes what it took before, starts nothing new, and
    # says IBV_EVENT_SQ_DRAINED once drained; only then may it go back to
    # RTS.  DEV1's QP sends here (its events are the ones read).
    cq0, cq1, qp0, qp1 = pair()

    def send1(wr_id):
        qp1.post_send(SendWR(wr_id=wr_id, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(rmr.buf, 64, rmr.lkey)],
                             send_flags=e.IBV_SEND_SIGNALED))

    def recv0(wr_id):
        qp0.post_recv(RecvWR(wr_id=wr_id, num_sge=1, sg=[SGE(smr.buf, 64, smr.lkey)]))

    send1(20)  # no receive at DEV0 yet: RNR, retried without end
    time.sleep(0.3)
    a = rclib.qp_attr(e.IBV_QPS_SQD, en_sqd_async_notify=1)
    rc = errno_of(lambda: qp1.modify(a, e.IBV_QP_STATE | e.IBV_QP_EN_SQD_ASYNC_NOTIFY))
    attr, _ = qp1.query(e.IBV_QP_STATE)
    ev = wait_async(d1.ctx, evfd, 1)
    check(rc == 0 and attr.qp_state == e.IBV_QPS_SQD and attr.sq_draining == 1 and ev is None,
          "RTS -> SQD with a SEND outstanding: SQD, sq_draining 1, no event yet",
          f"errno {rc}, {rclib.state_str(attr.qp_state)}, sq_draining {attr.sq_draining}, event {ev_str(ev)}")
    send1(21)  # posted in SQD: not started
    rc = errno_of(lambda: qp1.modify(rclib.qp_attr(e.IBV_QPS_RTS), e.IBV_QP_STATE))
    check(rc == errno.EINVAL, "SQD -> RTS while draining: EINVAL", f"errno {rc}")
    recv0(30)
    recv0(31)
    s = poll(cq1, 1, time.monotonic() + 30)
    ev = wait_async(d1.ctx, evfd, 10)
    attr, _ = qp1.query(e.IBV_QP_STATE)
    check(len(s) == 1 and s[0].wr_id == 20 and s[0].status == 0 and ev == e.IBV_EVENT_SQ_DRAINED
          and attr.sq_draining == 0,
          "the SEND taken before completes, then IBV_EVENT_SQ_DRAINED, sq_draining 0",
          f"{[rclib.wc_str(w) for w in s]}, event {ev_str(ev)}, sq_draining {attr.sq_draining}")
    r = poll(cq0, 2, time.monotonic() + 1)
    check([w.wr_id for w in r] == [30], "the SEND posted in SQD did not go out", f"{[rclib.wc_str(w) for w in r]}")
    rc = errno_of(lambda: qp1.modify(rclib.qp_attr(e.IBV_QPS_RTS), e.IBV_QP_STATE))
    s = poll(cq1, 1, time.monotonic() + 30)
    r = poll(cq0, 1, time.monotonic() + 30)
    check(rc == 0 and [w.wr_id for w in s] == [21] and [w.wr_id for w in r] == [31],
          "SQD -> RTS: the SEND posted in SQD goes out and completes",
          f"errno {rc}, {[rclib.wc_str(w) for w in s + r]}")
    qp1.modify(rclib.qp_attr(e.IBV_QPS_SQD), e.IBV_QP_STATE)
    ev = wait_async(d1.ctx, evfd, 1)
    rc = errno_of(lambda: qp1.modify(rclib.qp_attr(e.IBV_QPS_RTS), e.IBV_QP_STATE))
    check(ev is None and rc == 0, "RTS -> SQD with nothing outstanding and no notification asked: no event, "
          "back to RTS at once", f"event {ev_str(ev)}, errno {rc}")

    # RESET removes a QP's unpolled completions from its CQ (only its own).
    cq = d0.cq(32)
    cqb = d1.cq(32)
    qa, qb = d0.qp(cq, cq), d0.qp(cq, cq)
    pa, pb = d1.qp(cqb, cqb), d1.qp(cqb, cqb)
    for q0, q1 in ((qa, pa), (qb, pb)):
        rclib.to_init(q0)
        rclib.to_init(q1)
        rclib.to_rtr(q0, d0, d1, q1.qp_num, 300, mtu)
        rclib.to_rtr(q1, d1, d0, q0.qp_num, 100, mtu)
        rclib.to_rts(q0, 100)
        rclib.to_rts(q1, 300)
    for i, q in enumerate((qa, qa, qa, qb, qb)):
        wr = SendWR(wr_id=100 + i, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(smr.buf, 64, smr.lkey)],
                    send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_rdma(rmr.rkey, rmr.buf)
        q.post_send(wr)
        time.sleep(0.2)
    time.sleep(2)
    qa.modify(rclib.qp_attr(e.IBV_QPS_RESET), e.IBV_QP_STATE)
    left = rclib.drain(cq, 1.0)
    check(sorted(w.wr_id for w in left) == [103, 104] and all(w.qp_num == qb.qp_num for w in left),
          "modify to RESET drops the QP's 3 unpolled completions, the other QP's 2 stay",
          f"{[rclib.wc_str(w) for w in left]}")

    if len(sys.argv) > 5 and len(fds0) == 1:
        fd0 = fds0.pop()
        ifname = sys.argv[5]
        def wait_for(want, timeout=10):
            """Events until `want` (GID_CHANGE may come first: the GID
            table follows the link); the list of those seen."""
            seen = []
            end = time.monotonic() + timeout
            while time.monotonic() < end:
                ev = wait_async(d0.ctx, fd0, max(0.1, end - time.monotonic()))
                if ev is None:
                    break
                seen.append(ev)
                if ev == want:
                    break
            return seen

        subprocess.run(["ip", "link", "set", ifname, "down"], check=True)
        seen = wait_for(e.IBV_EVENT_PORT_ERR)
        check(seen and seen[-1] == e.IBV_EVENT_PORT_ERR, f"ip link set {ifname} down -> IBV_EVENT_PORT_ERR",
              f"got {[ev_str(x) for x in seen]}")
        subprocess.run(["ip", "link", "set", ifname, "up"], check=True)
        seen = wait_for(e.IBV_EVENT_PORT_ACTIVE)
        check(seen and seen[-1] == e.IBV_EVENT_PORT_ACTIVE, f"ip link set {ifname} up -> IBV_EVENT_PORT_ACTIVE",
              f"got {[ev_str(x) for x in seen]}")
    finish()


if __name__ == "__main__":
    main()
