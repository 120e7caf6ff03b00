#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""ibv_resize_cq (TAP checks), on DEV0 and over an RC QP pair DEV0 -> DEV1.

Usage: cq_resize.py DEV0 GID0 DEV1 GID1

  - empty CQ: resize up and down (including to exactly max_cqe); the depth
    is at least what was asked; 0, -1 and max_cqe + 1 -> EINVAL, depth kept;
  - CQEs outstanding: DEV1's receive CQ gets 10 receive completions (the
    last SEND is solicited and the CQ armed for solicited events, so the
    event says all 10 are in), 3 are polled, the CQ grows, 2 more are
    polled, it shrinks to exactly the 5 left, a shrink below that gives
    EINVAL and changes nothing, then the rest is polled: every wr_id once,
    in order; a second round of 10 SENDs arrives through the resized CQ;
  - resizing the sender's send CQ while its completions are still coming
    in (up, down, up): again every wr_id once, in order;
  - CQs armed for solicited events only get an event for an error
    completion: a send from a bad lkey, a receive flushed by ERR.
"""
import errno
import signal
import sys
import threading
import time

import pyverbs.enums as e
from pyverbs.cq import CQ, CompChannel
from pyverbs.pyverbs_error import PyverbsError
from pyverbs.wr import SGE, RecvWR, SendWR

import rclib
from rclib import Dev, wc_str
from taplib import check, errno_of, finish

POLL_S = 60  # seconds a completion may take (TCG is slow)
N = 10
MSG = 64


def resize_ok(cq, n, what):
    """Resize cq to n; check it worked and the depth is at least n."""
    before = cq.cqe
    err = errno_of(lambda: cq.resize(n))
    check(err == 0 and cq.cqe >= n, f"{what}: resize({n}) succeeds with depth >= {n}",
          f"errno {err}, depth {before} -> {cq.cqe}")
    return err == 0


def resize_fails(cq, n, what):
    """resize(n) must fail with EINVAL and leave the depth alone."""
    before = cq.cqe
    err = errno_of(lambda: cq.resize(n))
    check(err == errno.EINVAL and cq.cqe == before, f"{what}: resize({n}) -> EINVAL, depth unchanged",
          f"errno {err}, depth {before} -> {cq.cqe}")


def expect_ids(got, want, what):
    ids = [w.wr_id for w in got]
    bad = [w for w in got if w.status != e.IBV_WC_SUCCESS]
    check(ids == want and not bad, f"{what}: wr_ids {want[0]:#x}..{want[-1]:#x} once each, in order, successful"
          if want else f"{what}: nothing", f"got {[hex(i) for i in ids]} {'; '.join(wc_str(w) for w in bad[:2])}")


def empty_cq(d):
    max_cqe = d.dev_attr.max_cqe
    cq = CQ(d.ctx, 16)
    what = f"empty CQ on {d.name}"
    resize_ok(cq, 100, what + " (grow)")
    big = cq.cqe
    if resize_ok(cq, 8, what + " (shrink)"):
        check(cq.cqe < big, f"{what}: shrinking from {big} to 8 gives a smaller depth", f"depth {cq.cqe}")
    resize_ok(cq, 1, what)
    resize_ok(cq, max_cqe, what + " (max_cqe)")
    resize_fails(cq, 0, what)
    resize_fails(cq, -1, what)
    resize_fails(cq, max_cqe + 1, what)
    resize_ok(cq, 16, what)
    n, _ = cq.poll(8)
    check(n == 0, f"{what}: polls empty after the resizes", f"polled {n}")
    cq.close()


def wait_event(ch, cq, timeout):
    """get_cq_event with a timeout (pyverbs has no non-blocking form)."""
    res = []

    def run():
        try:
            ch.get_cq_event(cq)
            res.append(True)
        except PyverbsError as ex:
            res.append(ex)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    return res[0] if res else None


def event_within(ch, cq, timeout):
    """get_cq_event in this thread, cut by SIGALRM after `timeout` s (the
    read in ibv_get_cq_event then fails with EINTR: a thread would stay
    blocked in it holding the interpreter, and the script would hang
    instead of failing)."""
    old = signal.signal(signal.SIGALRM, lambda _s, _f: None)
    signal.alarm(timeout)
    try:
        ch.get_cq_event(cq)
        return True
    except PyverbsError as ex:
        return ex
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def traffic(d0, d1):
    scq = CQ(d0.ctx, 16)
    ch = CompChannel(d1.ctx)
    rcq = CQ(d1.ctx, 16, None, ch, 0)
    qp0 = d0.qp(scq, scq, send_wr=2 * N, recv_wr=1)
    qp1 = d1.qp(rcq, rcq, send_wr=1, recv_wr=2 * N)
    mr0 = d0.mr(2 * N * MSG)
    mr1 = d1.mr(2 * N * MSG)
    rclib.connect(d0, qp0, 0x100, d1, qp1, 0x200, min(d0.active_mtu(), d1.active_mtu()))

    def post_round(base):
        for i in range(N):
            off = (i % (2 * N)) * MSG
            qp1.post_recv(RecvWR(wr_id=base + 0x100 + i, num_sge=1, sg=[SGE(mr1.buf + off, MSG, mr1.lkey)]))
        for i in range(N):
            flags = e.IBV_SEND_SIGNALED | (e.IBV_SEND_SOLICITED if i == N - 1 else 0)
            sge = SGE(mr0.buf + i * MSG, MSG, mr0.lkey)
            qp0.post_send(SendWR(wr_id=base + i, opcode=e.IBV_WR_SEND, num_sge=1, sg=[sge], send_flags=flags))

    # Round 1: all 10 receive completions outstanding, then resize.
    rcq.req_notify(1)
    post_round(0)
    ev = wait_event(ch, rcq, POLL_S)
    check(ev is True, "solicited event for the 10th receive completion", f"got {ev!r}")
    if ev is not True:
        return
    rcq.ack_events(1)
    what = f"receive CQ on {d1.name} with {N} CQEs outstanding"
    recv = rclib.poll(rcq, 3, time.monotonic() + POLL_S)
    expect_ids(recv, [0x100, 0x101, 0x102], what + ", first 3 polled")
    resize_ok(rcq, 64, what + " less 3 (grow)")
    got = rclib.poll(rcq, 2, time.monotonic() + POLL_S)
    expect_ids(got, [0x103, 0x104], what + ", 2 more polled after the resize")
    resize_ok(rcq, 5, what + " less 5 (shrink to exactly the 5 outstanding)")
    resize_fails(rcq, 4, what + " less 5 (shrink below the outstanding count)")
    resize_fails(rcq, 0, what + " less 5")
    got += rclib.poll(rcq, 5, time.monotonic() + POLL_S)
    expect_ids(got, list(range(0x103, 0x100 + N)), what + ": every wr_id after the resizes")
    extra = rclib.drain(rcq, 0.5)
    check(not extra, what + ": nothing after the last one", "; ".join(wc_str(w) for w in extra[:4]))
    sent = rclib.poll(scq, N, time.monotonic() + POLL_S)
    expect_ids(sent, list(range(N)), f"send CQ on {d0.name}, round 1")

    # Round 2: through the resized receive CQ, while the send CQ is resized
    # under the arriving completions.
    resize_ok(rcq, 16, f"receive CQ on {d1.name} (back to 16)")
    post_round(0x1000)
    sent = rclib.poll(scq, 3, time.monotonic() + POLL_S)
    resize_ok(scq, 256, f"send CQ on {d0.name} with completions arriving (grow)")
    sent += rclib.poll(scq, 3, time.monotonic() + POLL_S)
    resize_ok(scq, 8, f"send CQ on {d0.name} with completions arriving (shrink)")
    sent += rclib.poll(scq, 1, time.monotonic() + POLL_S)
    resize_ok(scq, 32, f"send CQ on {d0.name} with completions arriving (grow)")
    sent += rclib.poll(scq, N - 7, time.monotonic() + POLL_S)
    expect_ids(sent, list(range(0x1000, 0x1000 + N)), f"send CQ on {d0.name}, round 2, resized 3 times")
    extra = rclib.drain(scq, 0.5)
    check(not extra, f"send CQ on {d0.name}: nothing after the last one", "; ".join(wc_str(w) for w in extra[:4]))
    recv = rclib.poll(rcq, N, time.monotonic() + POLL_S)
    expect_ids(recv, list(range(0x1100, 0x1100 + N)), f"receive CQ on {d1.name}, round 2")
    for o in (qp0, qp1, mr0, mr1, scq, rcq, ch):
        o.close()


def error_events(d0, d1):
    """CQs armed for solicited events only get an event for an error
    completion (ibv_req_notify_cq(3): an unsuccessful completion counts as
    solicited): a send from a bad lkey (LOC_PROT_ERR) on the sender's send
    CQ, and the peer's receive flushed when its QP is moved to ERR."""
    ch0, ch1 = CompChannel(d0.ctx), CompChannel(d1.ctx)
    scq, rcq = CQ(d0.ctx, 16, None, ch0, 0), CQ(d1.ctx, 16, None, ch1, 0)
    qp0 = d0.qp(scq, scq, send_wr=4, recv_wr=1)
    qp1 = d1.qp(rcq, rcq, send_wr=1, recv_wr=4)
    mr0, mr1 = d0.mr(MSG), d1.mr(MSG)
    rclib.connect(d0, qp0, 0x300, d1, qp1, 0x400, min(d0.active_mtu(), d1.active_mtu()))
    scq.req_notify(1)
    rcq.req_notify(1)
    qp1.post_recv(RecvWR(wr_id=0x51, num_sge=1, sg=[SGE(mr1.buf, MSG, mr1.lkey)]))
    qp0.post_send(SendWR(wr_id=0x50, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(mr0.buf, MSG, mr0.lkey ^ 0x7700)],
                         send_flags=e.IBV_SEND_SIGNALED))
    ev = event_within(ch0, scq, 20)
    got = rclib.poll(scq, 1, time.monotonic() + POLL_S)
    check(ev is True and len(got) == 1 and got[0].status == e.IBV_WC_LOC_PROT_ERR,
          "send CQ armed for solicited events: event for a LOC_PROT_ERR completion",
          f"event {ev!r}, {[wc_str(w) for w in got]}")
    if ev is True:
        scq.ack_events(1)
    qp1.modify(rclib.qp_attr(e.IBV_QPS_ERR), e.IBV_QP_STATE)
    ev = event_within(ch1, rcq, 20)
    got = rclib.poll(rcq, 1, time.monotonic() + POLL_S)
    check(ev is True and len(got) == 1 and got[0].status == e.IBV_WC_WR_FLUSH_ERR and got[0].wr_id == 0x51,
          "receive CQ armed for solicited events: event for the flushed receive (QP moved to ERR)",
          f"event {ev!r}, {[wc_str(w) for w in got]}")
    if ev is True:
        rcq.ack_events(1)


def main():
    if len(sys.argv) != 5:
        sys.exit(f"usage: {sys.argv[0]} DEV0 GID0 DEV1 GID1")
    d0 = Dev(sys.argv[1], int(sys.argv[2]))
    d1 = Dev(sys.argv[3], int(sys.argv[4]))
    empty_cq(d0)
    traffic(d0, d1)
    error_events(d0, d1)
    finish()


if __name__ == "__main__":
    main()
