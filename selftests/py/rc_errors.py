#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""RC error handling: bad QP attributes and transitions, bad work requests
and remote access violations, between two devices in one process (DEV0 =
requester, DEV1 = responder; packets cross the veth).

Usage: rc_errors.py [--limit S] DEV0 GID0 DEV1 GID1 CASE...
       rc_errors.py --list

The CASEs run one after the other in this process, each with new device
contexts and PDs, between "#@ begin CASE" and "#@ end CASE ok|fail" lines
(taplib.run_cases); one "ok/not ok" line per check.  --limit: seconds a
case may take (default 150).  The expected errnos and
completion statuses are those of ib_core and the in-kernel drivers (rxe,
mlx5) -- see each case.  Every case ends by moving data over a fresh QP
pair on the same devices: an error must not break the device.
"""
import errno
import os
import sys
import time

import pyverbs.enums as e
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.wr import SGE, RecvWR, SendWR

import rclib
from rclib import ALL_ACCESS, MASK_RTR, MASK_RTS, Dev, qp_attr, status_str, state_str, wc_str
from taplib import check, errno_of, run_cases

SYS_IB = "/sys/class/infiniband"
POLL_S = 60  # seconds an expected completion may take (TCG is slow)


def counters(dev):
    """The port hw_counters of dev as a dict (empty if there are none)."""
    d = f"{SYS_IB}/{dev}/ports/1/hw_counters"
    out = {}
    try:
        names = os.listdir(d)
    except OSError:
        return out
    for n in names:
        try:
            with open(f"{d}/{n}") as f:
                out[n] = int(f.read().strip() or 0)
        except (OSError, ValueError):
            pass
    return out


class Counters:
    """Counter deltas of both devices since construction."""

    def __init__(self, d0, d1):
        self.names = (d0.name, d1.name)
        self.before = [counters(n) for n in self.names]

    def delta(self):
        after = [counters(n) for n in self.names]
        return [{k: a.get(k, 0) - b.get(k, 0) for k in a} for a, b in zip(after, self.before)]

    def show(self):
        for name, dl in zip(self.names, self.delta()):
            nz = " ".join(f"{k} +{v}" for k, v in sorted(dl.items()) if v)
            print(f"# {name} counters: {nz or 'none'}")

    def expect_min(self, side, name, least):
        if not self.before[side]:
            print(f"# ({self.names[side]} has no hw_counters: {name} not checked)")
            return
        got = self.delta()[side].get(name)
        if got is None and os.environ.get("RROCE_TYPE", "rroce") != "rroce":
            print(f"# ({self.names[side]} has no counter {name}: not checked)")
            return
        check(got is not None and got >= least, f"{self.names[side]} {name} went up by at least {least}",
              f"delta {got}")


class Pair:
    """An RC QP pair qp0 (d0) <-> qp1 (d1) with its own CQs and buffers."""

    def __init__(self, d0, d1, size=65536, access1=ALL_ACCESS, connect=True, **conn):
        self.d0, self.d1 = d0, d1
        _live.append(self)  # alive (QPs not destroyed) until its case settled
        self.cq0 = d0.cq(64)
        self.cq1 = d1.cq(64)
        self.qp0 = d0.qp(self.cq0, self.cq0, send_wr=16, recv_wr=16)
        self.qp1 = d1.qp(self.cq1, self.cq1, send_wr=16, recv_wr=16)
        self.size = size
        self.mr0 = d0.mr(size)
        self.mr1 = d1.mr(size, access1)
        if connect:
            mtu = conn.pop("mtu", d0.active_mtu())
            rclib.connect(d0, self.qp0, 0x100, d1, self.qp1, 0x200, mtu, **conn)

    def send(self, wr_id, opcode, length, off=0, lkey=None, raddr=None, rkey=None, imm=None):
        sge = SGE(self.mr0.buf + off, length, self.mr0.lkey if lkey is None else lkey)
        wr = SendWR(wr_id=wr_id, opcode=opcode, num_sge=1, sg=[sge], send_flags=e.IBV_SEND_SIGNALED)
        if imm is not None:
            wr.imm_data = imm
        if raddr is not None:
            wr.set_wr_rdma(rkey, raddr)
        self.qp0.post_send(wr)

    def recv(self, wr_id, length, off=0):
        self.qp1.post_recv(RecvWR(wr_id=wr_id, num_sge=1, sg=[SGE(self.mr1.buf + off, length, self.mr1.lkey)]))


def expect_wcs(cq, want, what):
    """Poll exactly len(want) completions from cq and check each against
    (wr_id, status, opcode or None), in order; then none may follow.
    Returns the completions."""
    got = rclib.poll(cq, len(want), time.monotonic() + POLL_S)
    for wc in got:
        print(f"# {what}: {wc_str(wc)}")
    check(len(got) == len(want), f"{what}: {len(want)} completion(s) arrive",
          f"got {len(got)} within {POLL_S} s")
    for i, (wc, (wr_id, status, opcode)) in enumerate(zip(got, want)):
        ok_status = wc.status in status if isinstance(status, tuple) else wc.status == status
        names = "/".join(status_str(s) for s in status) if isinstance(status, tuple) else status_str(status)
        check(wc.wr_id == wr_id and ok_status, f"{what}: completion {i + 1} is wr_id {wr_id:#x} with {names}",
              wc_str(wc))
        if opcode is not None:
            check(wc.opcode == opcode, f"{what}: completion {i + 1} opcode {rclib.opcode_str(opcode)}", wc_str(wc))
    # What is already queued behind them is checked now; what might still
    # come (a late retransmission's completion) at the end of the case, in
    # one settle for all its CQs (settled()): 0.5 s per expect_wcs was most
    # of this script's time (23 cases, ~35 of ~48 s asleep).
    extra = rclib.drain(cq, 0)
    check(not extra, f"{what}: no further completions", "; ".join(wc_str(w) for w in extra[:4]))
    _to_settle.append((cq, what))
    return got


_to_settle = []
_live = []
SETTLE_S = 0.5


def settled(case):
    """`case` followed by one SETTLE_S wait for stray completions on every CQ
    its expect_wcs polled: none may arrive."""
    def run(*devs):
        _to_settle.clear()
        try:
            case(*devs)
            if _to_settle:
                time.sleep(SETTLE_S)
            for cq, what in _to_settle:
                extra = rclib.drain(cq, 0)
                check(not extra, f"{what}: nothing more within {SETTLE_S} s",
                      "; ".join(wc_str(w) for w in extra[:4]))
        finally:
            _to_settle.clear()
            _live.clear()
    return run


def expect_state(qp, state, what):
    st = rclib.qp_state(qp)
    check(st == state, f"{what} is in {state_str(state)}", f"it is in {state_str(st)}")


def pattern(n, seed):
    return bytes((i * 7 + seed) & 0xFF for i in range(n))


def fresh_pair_ok(d0, d1):
    """A new QP pair on the same devices moves data correctly: SEND,
    RDMA WRITE and RDMA READ of 64 KiB each, verified."""
    p = Pair(d0, d1, size=4 * 65536)
    n = 65536
    ok = True
    detail = ""
    try:
        src = os.urandom(n)
        p.mr0.write(src, n, 0)
        p.recv(1, n, 0)
        p.send(2, e.IBV_WR_SEND, n, 0)
        src_w = os.urandom(n)
        p.mr0.write(src_w, n, n)
        p.send(3, e.IBV_WR_RDMA_WRITE, n, n, raddr=p.mr1.buf + n, rkey=p.mr1.rkey)
        src_r = os.urandom(n)
        p.mr1.write(src_r, n, 2 * n)
        p.send(4, e.IBV_WR_RDMA_READ, n, 2 * n, raddr=p.mr1.buf + 2 * n, rkey=p.mr1.rkey)
        dl = time.monotonic() + POLL_S
        w0 = rclib.poll(p.cq0, 3, dl)
        w1 = rclib.poll(p.cq1, 1, dl)
        sts = [(w.wr_id, w.status) for w in w0 + w1]
        if sts != [(2, 0), (3, 0), (4, 0), (1, 0)]:
            ok, detail = False, "completions: " + "; ".join(wc_str(w) for w in w0 + w1)
        elif p.mr1.read(n, 0) != src:
            ok, detail = False, "SEND data differs"
        elif p.mr1.read(n, n) != src_w:
            ok, detail = False, "WRITE data differs"
        elif p.mr0.read(n, 2 * n) != src_r:
            ok, detail = False, "READ data differs"
    except PyverbsRDMAError as ex:
        ok, detail = False, f"verbs error: {ex}"
    check(ok, "a fresh QP pair on the same devices moves 64 KiB by SEND, WRITE and READ intact", detail)


# ---------------------------------------------------------------- the cases
# Each takes (d0, d1).  Errnos: ib_core's ib_modify_qp_is_ok() (illegal
# transition, missing attribute) and the drivers' attribute checks (rxe
# rxe_qp_chk_attr(), mlx5 mlx5_ib_modify_qp()) all give EINVAL.

def new_qp(d):
    cq = d.cq(16)
    qp = d.qp(cq, cq)
    return qp, cq


def rtr_attr(d0, d1, qp, **over):
    a = dict(path_mtu=d0.active_mtu(), dest_qp_num=qp.qp_num, rq_psn=0, max_dest_rd_atomic=16,
             min_rnr_timer=12, ah_attr=rclib.ah_to(d0, d1))
    a.update(over)
    return qp_attr(e.IBV_QPS_RTR, **a)


def rts_attr(**over):
    a = dict(timeout=14, retry_cnt=7, rnr_retry=7, sq_psn=0, max_rd_atomic=16)
    a.update(over)
    return qp_attr(e.IBV_QPS_RTS, **a)


def case_reset_to_rts(d0, d1):
    qp, _cq = new_qp(d0)
    check(errno_of(lambda: qp.modify(rts_attr(), MASK_RTS)) == errno.EINVAL,
          "RESET -> RTS (with all RTS attributes) -> EINVAL")
    check(errno_of(lambda: qp.modify(qp_attr(e.IBV_QPS_RTS), e.IBV_QP_STATE)) == errno.EINVAL,
          "RESET -> RTS (state only) -> EINVAL")
    expect_state(qp, e.IBV_QPS_RESET, "the QP after the refused transitions")
    rclib.to_init(qp)
    check(errno_of(lambda: qp.modify(rts_attr(), MASK_RTS)) == errno.EINVAL, "INIT -> RTS -> EINVAL")
    expect_state(qp, e.IBV_QPS_INIT, "the QP")
    fresh_pair_ok(d0, d1)


def _rtr_missing(d0, d1, bit, name):
    qp, _cq = new_qp(d0)
    rclib.to_init(qp)
    a = rtr_attr(d0, d1, qp)
    check(errno_of(lambda: qp.modify(a, MASK_RTR & ~bit)) == errno.EINVAL, f"INIT -> RTR without {name} -> EINVAL")
    expect_state(qp, e.IBV_QPS_INIT, "the QP after the refused transition")
    check(errno_of(lambda: qp.modify(a, MASK_RTR)) == 0, f"INIT -> RTR with {name} succeeds")
    fresh_pair_ok(d0, d1)


def case_rtr_no_dest_qpn(d0, d1):
    _rtr_missing(d0, d1, e.IBV_QP_DEST_QPN, "IBV_QP_DEST_QPN")


def case_rtr_no_path_mtu(d0, d1):
    _rtr_missing(d0, d1, e.IBV_QP_PATH_MTU, "IBV_QP_PATH_MTU")


def case_bad_path_mtu(d0, d1):
    qp, _cq = new_qp(d0)
    rclib.to_init(qp)
    active = d0.active_mtu()
    for v, why in ((0, "not an MTU"), (6, "not an MTU"), (7, "not an MTU"), (255, "not an MTU")):
        check(errno_of(lambda: qp.modify(rtr_attr(d0, d1, qp, path_mtu=v), MASK_RTR)) == errno.EINVAL,
              f"path_mtu {v} ({why}) -> EINVAL")
    if active < e.IBV_MTU_4096:
        check(errno_of(lambda: qp.modify(rtr_attr(d0, d1, qp, path_mtu=active + 1), MASK_RTR)) == errno.EINVAL,
              f"path_mtu {rclib.MTU_BYTES[active + 1]} above the active {rclib.MTU_BYTES[active]} -> EINVAL")
    expect_state(qp, e.IBV_QPS_INIT, "the QP after the refused transitions")
    check(errno_of(lambda: qp.modify(rtr_attr(d0, d1, qp, path_mtu=e.IBV_MTU_256), MASK_RTR)) == 0,
          "path_mtu 256 is accepted")
    attr, _ = qp.query(e.IBV_QP_PATH_MTU)
    check(attr.path_mtu == e.IBV_MTU_256, "query_qp returns path_mtu 256", f"{attr.path_mtu}")
    fresh_pair_ok(d0, d1)


def case_rd_atomic_above_max(d0, d1):
    da = d0.dev_attr
    print(f"# device max_qp_rd_atom {da.max_qp_rd_atom}, max_qp_init_rd_atom {da.max_qp_init_rd_atom}")
    qp, _cq = new_qp(d0)
    rclib.to_init(qp)
    big = da.max_qp_rd_atom + 1
    check(errno_of(lambda: qp.modify(rtr_attr(d0, d1, qp, max_dest_rd_atomic=big), MASK_RTR)) == errno.EINVAL,
          f"max_dest_rd_atomic {big} (above max_qp_rd_atom) -> EINVAL")
    expect_state(qp, e.IBV_QPS_INIT, "the QP after the refused transition")
    check(errno_of(lambda: qp.modify(rtr_attr(d0, d1, qp, max_dest_rd_atomic=da.max_qp_rd_atom), MASK_RTR)) == 0,
          f"max_dest_rd_atomic {da.max_qp_rd_atom} is accepted")
    big = da.max_qp_init_rd_atom + 1
    check(errno_of(lambda: qp.modify(rts_attr(max_rd_atomic=big), MASK_RTS)) == errno.EINVAL,
          f"max_rd_atomic {big} (above max_qp_init_rd_atom) -> EINVAL")
    check(errno_of(lambda: qp.modify(rts_attr(timeout=32), MASK_RTS)) == errno.EINVAL,
          "timeout 32 (5-bit field) -> EINVAL")
    expect_state(qp, e.IBV_QPS_RTR, "the QP after the refused transitions")
    check(errno_of(lambda: qp.modify(rts_attr(max_rd_atomic=da.max_qp_init_rd_atom), MASK_RTS)) == 0,
          f"max_rd_atomic {da.max_qp_init_rd_atom} is accepted")
    attr, _ = qp.query(e.IBV_QP_MAX_QP_RD_ATOMIC | e.IBV_QP_MAX_DEST_RD_ATOMIC)
    check((attr.max_rd_atomic, attr.max_dest_rd_atomic) == (da.max_qp_init_rd_atom, da.max_qp_rd_atom),
          "query_qp returns them", f"{attr.max_rd_atomic}/{attr.max_dest_rd_atomic}")
    fresh_pair_ok(d0, d1)


def case_post_send_init(d0, d1):
    p = Pair(d0, d1, connect=False)
    wr = SendWR(wr_id=1, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(p.mr0.buf, 64, p.mr0.lkey)])
    r = errno_of(lambda: p.qp0.post_send(wr))
    check(r == errno.EINVAL, "ibv_post_send in RESET -> EINVAL", f"errno {r}")
    rwr = RecvWR(wr_id=2, num_sge=1, sg=[SGE(p.mr0.buf, 64, p.mr0.lkey)])
    r = errno_of(lambda: p.qp0.post_recv(rwr))
    check(r == errno.EINVAL, "ibv_post_recv in RESET -> EINVAL", f"errno {r}")
    rclib.to_init(p.qp0)
    r = errno_of(lambda: p.qp0.post_send(wr))
    check(r == errno.EINVAL, "ibv_post_send in INIT -> EINVAL", f"errno {r}")
    r = errno_of(lambda: p.qp0.post_recv(rwr))
    check(r == 0, "ibv_post_recv in INIT is allowed", f"errno {r}")
    rclib.to_rtr(p.qp0, d0, d1, p.qp1.qp_num, 0, d0.active_mtu())
    r = errno_of(lambda: p.qp0.post_send(wr))
    check(r == errno.EINVAL, "ibv_post_send in RTR -> EINVAL", f"errno {r}")
    extra = rclib.drain(p.cq0, 0.5)
    check(not extra, "no completion for the refused work requests", "; ".join(wc_str(w) for w in extra))
    # The receive posted in INIT is flushed when the QP goes to ERR.
    p.qp0.modify(qp_attr(e.IBV_QPS_ERR), e.IBV_QP_STATE)
    expect_wcs(p.cq0, [(2, e.IBV_WC_WR_FLUSH_ERR, None)], "after RTR -> ERR, the receive posted in INIT")
    # A receive posted in ERR is flushed at once (the drain pattern: move
    # to ERR, post a last receive, wait for its flush), without any send.
    recv_in_err(p, 3)
    fresh_pair_ok(d0, d1)


def recv_in_err(p, wr_id):
    """Post receives wr_id and wr_id + 1 (one list) to p.qp0, which is in
    ERR: both complete with WR_FLUSH_ERR by themselves, in order."""
    sge = [SGE(p.mr0.buf, 64, p.mr0.lkey)]
    # pyverbs' RecvWR keeps a C pointer to next_wr's struct but no
    # reference to the object: a temporary next_wr is freed at once, and
    # the list then ends in freed memory (garbage num_sge -> EINVAL, seen
    # once in a boot where this case ran first).  `last` keeps it alive.
    last = RecvWR(wr_id=wr_id + 1, num_sge=1, sg=sge)
    wr = RecvWR(wr_id=wr_id, num_sge=1, sg=sge, next_wr=last)
    r = errno_of(lambda: p.qp0.post_recv(wr))
    check(r == 0, "ibv_post_recv in ERR is allowed (the receives are flushed)", f"errno {r}")
    if r == 0:
        expect_wcs(p.cq0, [(wr_id, e.IBV_WC_WR_FLUSH_ERR, e.IBV_WC_RECV),
                           (wr_id + 1, e.IBV_WC_WR_FLUSH_ERR, e.IBV_WC_RECV)],
                   "receives posted to the QP in ERR")


def _requester_error(d0, d1, p, first, status, what, c, responder_untouched=True):
    """first: callable posting the failing WR (wr_id 1); then two SENDs
    (wr_id 2, 3) are posted behind it.  Expect: wr 1 completes with status,
    2 and 3 with WR_FLUSH_ERR, the requester QP in ERR, a WR posted in ERR
    flushed too, nothing delivered to the responder."""
    p.mr1.write(pattern(p.size, 0x33), p.size, 0)
    p.recv(100, 4096, 0)
    first()
    p.send(2, e.IBV_WR_SEND, 64, 0)
    p.send(3, e.IBV_WR_SEND, 64, 0)
    expect_wcs(p.cq0, [(1, status, None), (2, e.IBV_WC_WR_FLUSH_ERR, None), (3, e.IBV_WC_WR_FLUSH_ERR, None)],
               f"requester, {what}")
    # The QP went to ERR by itself: libibverbs still believes it is in RTS
    # (no modify or query yet), receives posted now are flushed all the same.
    recv_in_err(p, 200)
    expect_state(p.qp0, e.IBV_QPS_ERR, "the requester QP")
    r = errno_of(lambda: p.send(4, e.IBV_WR_SEND, 64, 0))
    if r == 0:
        expect_wcs(p.cq0, [(4, e.IBV_WC_WR_FLUSH_ERR, None)], "a SEND posted to the QP in ERR")
    else:
        check(False, "a SEND can be posted to the QP in ERR (it is flushed)", f"errno {r}")
    st1 = rclib.qp_state(p.qp1)
    print(f"# responder QP state afterwards: {state_str(st1)}")
    if responder_untouched:
        w1 = rclib.drain(p.cq1, 0.5)
        if st1 == e.IBV_QPS_ERR:
            # a responder that went to ERR flushes its receive
            check(len(w1) == 1 and w1[0].wr_id == 100 and w1[0].status == e.IBV_WC_WR_FLUSH_ERR,
                  "responder (in ERR): only its receive, flushed", "; ".join(wc_str(w) for w in w1))
        else:
            check(not w1, "responder: no completion (no SEND delivered)", "; ".join(wc_str(w) for w in w1))
        check(p.mr1.read(p.size, 0) == pattern(p.size, 0x33), "responder memory unchanged")
    c.show()
    c.expect_min(0, "completion_errors", 1)
    fresh_pair_ok(d0, d1)


def bad_key(k):
    """A key that is not k and most likely not any other live key."""
    return (k ^ 0x5A5A5A00) & 0xFFFFFFFF


def case_bad_lkey(d0, d1):
    # rxe: the requester's copy from the SGE fails -> IB_WC_LOC_PROT_ERR.
    p = Pair(d0, d1)
    c = Counters(d0, d1)
    _requester_error(d0, d1, p, lambda: p.send(1, e.IBV_WR_SEND, 1024, 0, lkey=bad_key(p.mr0.lkey)),
                     e.IBV_WC_LOC_PROT_ERR, "SEND with a bad lkey", c)
    st1 = rclib.qp_state(p.qp1)
    check(st1 == e.IBV_QPS_RTS, "the responder QP is still in RTS (nothing reached it)", state_str(st1))


def case_write_bad_rkey(d0, d1):
    p = Pair(d0, d1)
    c = Counters(d0, d1)
    _requester_error(d0, d1, p, lambda: p.send(1, e.IBV_WR_RDMA_WRITE, 2048, 0, raddr=p.mr1.buf,
                                               rkey=bad_key(p.mr1.rkey)),
                     e.IBV_WC_REM_ACCESS_ERR, "RDMA WRITE with a bad rkey", c)


def case_write_beyond_mr(d0, d1):
    # 8 KiB starting 4 KiB before the end of the remote MR: the responder
    # checks the whole range on the first packet (IBA C9-88ff; rxe
    # check_rkey()), so nothing at all may be written.
    p = Pair(d0, d1)
    c = Counters(d0, d1)
    _requester_error(d0, d1, p, lambda: p.send(1, e.IBV_WR_RDMA_WRITE, 8192, 0, raddr=p.mr1.buf + p.size - 4096,
                                               rkey=p.mr1.rkey),
                     e.IBV_WC_REM_ACCESS_ERR, "RDMA WRITE running 4 KiB past the end of the remote MR", c)


def case_write_no_remote_write(d0, d1):
    p = Pair(d0, d1, access1=e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_READ)
    c = Counters(d0, d1)
    _requester_error(d0, d1, p, lambda: p.send(1, e.IBV_WR_RDMA_WRITE, 2048, 0, raddr=p.mr1.buf, rkey=p.mr1.rkey),
                     e.IBV_WC_REM_ACCESS_ERR, "RDMA WRITE to an MR without REMOTE_WRITE", c)


def case_read_no_remote_read(d0, d1):
    p = Pair(d0, d1, access1=e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE)
    c = Counters(d0, d1)
    p.mr0.write(pattern(p.size, 0x44), p.size, 0)
    _requester_error(d0, d1, p, lambda: p.send(1, e.IBV_WR_RDMA_READ, 2048, 4096, raddr=p.mr1.buf, rkey=p.mr1.rkey),
                     e.IBV_WC_REM_ACCESS_ERR, "RDMA READ from an MR without REMOTE_READ", c)
    check(p.mr0.read(2048, 4096) == pattern(p.size, 0x44)[4096:4096 + 2048], "the local READ buffer is unchanged")


def case_qp_no_remote_write(d0, d1):
    # The responder QP's access flags lack REMOTE_WRITE: a WRITE_WITH_IMM
    # of length 0 is an invalid request (ibv_poll_cq(3): REM_INV_REQ_ERR,
    # "qp_access_flags in remote QP wasn't configured to support this
    # operation"; rxe check_qp_attr_access), whatever its length; it takes
    # no receive.  Until 2026-12-07 it was executed (and a non-empty WRITE
    # got REM_ACCESS_ERR).
    p = Pair(d0, d1, access=e.IBV_ACCESS_LOCAL_WRITE)
    c = Counters(d0, d1)
    _requester_error(d0, d1, p, lambda: p.send(1, e.IBV_WR_RDMA_WRITE_WITH_IMM, 0, 0, raddr=p.mr1.buf,
                                               rkey=p.mr1.rkey, imm=5),
                     e.IBV_WC_REM_INV_REQ_ERR, "WRITE_WITH_IMM of 0 bytes to a QP without REMOTE_WRITE", c)


def case_qp_no_remote_read(d0, d1):
    # The same for a 4 KiB READ from a QP without REMOTE_READ.
    p = Pair(d0, d1, access=e.IBV_ACCESS_LOCAL_WRITE)
    c = Counters(d0, d1)
    _requester_error(d0, d1, p, lambda: p.send(1, e.IBV_WR_RDMA_READ, 4096, 0, raddr=p.mr1.buf, rkey=p.mr1.rkey),
                     e.IBV_WC_REM_INV_REQ_ERR, "READ of 4 KiB from a QP without REMOTE_READ", c)


def case_send_too_long(d0, d1):
    # The responder's receive buffer is 1 KiB, the SEND 4 KiB (4 packets at
    # path MTU 1024).  Requester: NAK invalid request -> REM_INV_REQ_ERR.
    # Responder: the receive completes in error -- mlx5 reports LOC_LEN_ERR,
    # rxe_resp.c's RESPST_ERR_LENGTH path REM_INV_REQ_ERR (6.12 actually
    # takes its malformed-WQE path: REM_OP_ERR / LOC_QP_OP_ERR, not accepted
    # here); both QPs go to ERR.
    p = Pair(d0, d1)
    c = Counters(d0, d1)
    p.mr0.write(os.urandom(8192), 8192, 0)
    p.recv(100, 1024, 0)
    p.recv(101, 8192, 8192)
    p.send(1, e.IBV_WR_SEND, 4096, 0)
    p.send(2, e.IBV_WR_SEND, 64, 0)
    expect_wcs(p.cq0, [(1, e.IBV_WC_REM_INV_REQ_ERR, None), (2, e.IBV_WC_WR_FLUSH_ERR, None)],
               "requester, SEND of 4 KiB into a 1 KiB receive buffer")
    expect_state(p.qp0, e.IBV_QPS_ERR, "the requester QP")
    expect_wcs(p.cq1, [(100, (e.IBV_WC_LOC_LEN_ERR, e.IBV_WC_REM_INV_REQ_ERR), None),
                       (101, e.IBV_WC_WR_FLUSH_ERR, None)],
               "responder, the 1 KiB receive")
    expect_state(p.qp1, e.IBV_QPS_ERR, "the responder QP")
    c.show()
    c.expect_min(0, "completion_errors", 1)
    c.expect_min(1, "completion_errors", 1)
    fresh_pair_ok(d0, d1)


def case_read_then_bad_write(d0, d1):
    # A 1 MiB READ (1,024 response packets at path MTU 1024) and right
    # behind it a WRITE with a bad rkey: the responder answers the READ in
    # full, then NAKs the WRITE (IBA 9.7.5.2: responses in PSN order; rxe
    # finishes read_reply first).  Until 2026-12-07 the NAK, queued behind
    # the READ's unsent responses, was dropped with them when the responder
    # entered ERR: the READ ended RETRY_EXC_ERR (retry_cnt 2 here; with 7,
    # retried for ever) and the WRITE was flushed.
    size = 1 << 20
    p = Pair(d0, d1, size=size, retry_cnt=2)
    c = Counters(d0, d1)
    data = os.urandom(size)
    p.mr1.write(data, size, 0)
    # One post: both requests leave before the responder has sent much.
    wrs = []
    for wr_id, op, n, rkey in ((1, e.IBV_WR_RDMA_READ, size, p.mr1.rkey),
                               (2, e.IBV_WR_RDMA_WRITE, 2048, bad_key(p.mr1.rkey)), (3, e.IBV_WR_SEND, 64, None)):
        wr = SendWR(wr_id=wr_id, opcode=op, num_sge=1, sg=[SGE(p.mr0.buf, n, p.mr0.lkey)],
                    send_flags=e.IBV_SEND_SIGNALED)
        if rkey is not None:
            wr.set_wr_rdma(rkey, p.mr1.buf)
        wrs.append(wr)
    wrs[0].next_wr, wrs[1].next_wr = wrs[1], wrs[2]
    p.qp0.post_send(wrs[0])
    expect_wcs(p.cq0, [(1, e.IBV_WC_SUCCESS, e.IBV_WC_RDMA_READ), (2, e.IBV_WC_REM_ACCESS_ERR, None),
                       (3, e.IBV_WC_WR_FLUSH_ERR, None)], "requester, READ 1 MiB then WRITE with a bad rkey")
    check(p.mr0.read(size, 0) == data, "the READ's 1 MiB arrived intact")
    expect_state(p.qp0, e.IBV_QPS_ERR, "the requester QP")
    expect_state(p.qp1, e.IBV_QPS_ERR, "the responder QP")
    c.show()
    fresh_pair_ok(d0, d1)


def case_rnr_retry_exceeded(d0, d1):
    # No receive posted, rnr_retry 0: the first RNR NAK ends the SEND with
    # IBV_WC_RNR_RETRY_EXC_ERR.
    p = Pair(d0, d1, rnr_retry=0, min_rnr_timer=1)
    c = Counters(d0, d1)
    p.send(1, e.IBV_WR_SEND, 512, 0)
    p.send(2, e.IBV_WR_SEND, 512, 0)
    expect_wcs(p.cq0, [(1, e.IBV_WC_RNR_RETRY_EXC_ERR, None), (2, e.IBV_WC_WR_FLUSH_ERR, None)],
               "requester, SEND without a receive posted, rnr_retry 0")
    expect_state(p.qp0, e.IBV_QPS_ERR, "the requester QP")
    check(not rclib.drain(p.cq1, 0.3), "responder: no completion")
    c.show()
    c.expect_min(1, "rnr_naks_sent", 1)
    c.expect_min(0, "rnr_naks_rcvd", 1)
    c.expect_min(0, "rnr_retry_exceeded", 1)
    fresh_pair_ok(d0, d1)


def case_retry_exceeded(d0, d1):
    # Connected to a QP number nobody has: no ACK ever comes; timeout 10
    # (4.2 ms), retry_cnt 2 -> IBV_WC_RETRY_EXC_ERR after 3 tries.
    p = Pair(d0, d1, connect=False)
    c = Counters(d0, d1)
    rclib.to_init(p.qp0)
    rclib.to_rtr(p.qp0, d0, d1, 0xFFFF00, 0, d0.active_mtu())
    rclib.to_rts(p.qp0, 0, timeout=10, retry_cnt=2)
    t0 = time.monotonic()
    p.send(1, e.IBV_WR_RDMA_WRITE, 256, 0, raddr=p.mr1.buf, rkey=p.mr1.rkey)
    p.send(2, e.IBV_WR_SEND, 64, 0)
    expect_wcs(p.cq0, [(1, e.IBV_WC_RETRY_EXC_ERR, None), (2, e.IBV_WC_WR_FLUSH_ERR, None)],
               "requester, WRITE to a QP number that does not exist, retry_cnt 2")
    print(f"# the error came after {time.monotonic() - t0:.2f} s")
    expect_state(p.qp0, e.IBV_QPS_ERR, "the requester QP")
    c.show()
    c.expect_min(0, "retry_exceeded", 1)
    c.expect_min(0, "ack_timeouts", 2)
    c.expect_min(1, "rx_dropped", 3)
    fresh_pair_ok(d0, d1)


def case_retry_cnt_7_infinite(d0, d1):
    # retry_cnt 7 never runs out: the project's documented semantics
    # (README "retry_cnt/rnr_retry (7 = infinite)"; rxe does the same --
    # IBA only makes rnr_retry 7 infinite).  No ACK ever comes (unknown
    # destination QP), timeout 8 (1 ms): after 20 and more ACK timeouts the
    # WRITE must still be pending, then ERR flushes it.
    p = Pair(d0, d1, connect=False)
    c = Counters(d0, d1)
    rclib.to_init(p.qp0)
    rclib.to_rtr(p.qp0, d0, d1, 0xFFFF00, 0, d0.active_mtu())
    rclib.to_rts(p.qp0, 0, timeout=8, retry_cnt=7)
    p.send(1, e.IBV_WR_RDMA_WRITE, 256, 0, raddr=p.mr1.buf, rkey=p.mr1.rkey)
    t0 = time.monotonic()
    early = []
    while time.monotonic() - t0 < POLL_S and not early:
        if c.before[0] and c.delta()[0].get("ack_timeouts", 0) >= 20:
            break
        if not c.before[0] and time.monotonic() - t0 > 5:
            break
        n, wcs = p.cq0.poll(4)
        early.extend(wcs[:n])
        time.sleep(0.05)
    print(f"# waited {time.monotonic() - t0:.2f} s")
    check(not early, "no completion while it keeps retrying (retry_cnt 7 = infinite)",
          "; ".join(wc_str(w) for w in early))
    c.show()
    c.expect_min(0, "ack_timeouts", 20)
    if not early:
        expect_state(p.qp0, e.IBV_QPS_RTS, "the requester QP")
        p.qp0.modify(qp_attr(e.IBV_QPS_ERR), e.IBV_QP_STATE)
        expect_wcs(p.cq0, [(1, e.IBV_WC_WR_FLUSH_ERR, None)], "after RTS -> ERR, the pending WRITE")
    fresh_pair_ok(d0, d1)


def _post_atomic(p, wr_id, opcode, raddr, compare_add, swap=0, off=0):
    wr = SendWR(wr_id=wr_id, opcode=opcode, num_sge=1, sg=[SGE(p.mr0.buf + off, 8, p.mr0.lkey)],
                send_flags=e.IBV_SEND_SIGNALED)
    wr.set_wr_atomic(p.mr1.rkey, raddr, compare_add, swap)
    p.qp0.post_send(wr)


def case_atomic_misaligned_fetch_add(d0, d1):
    # IBA C9-31 / o9-xx: the atomic VA must be 8-byte aligned, else the
    # responder NAKs "invalid request" (rxe check_op_valid/atomic: same).
    p = Pair(d0, d1)
    c = Counters(d0, d1)
    _requester_error(d0, d1, p, lambda: _post_atomic(p, 1, e.IBV_WR_ATOMIC_FETCH_AND_ADD, p.mr1.buf + 4, 1),
                     e.IBV_WC_REM_INV_REQ_ERR, "ATOMIC FETCH_AND_ADD at an address 4 bytes off alignment", c)


def case_atomic_misaligned_cmp_swap(d0, d1):
    p = Pair(d0, d1)
    c = Counters(d0, d1)
    _requester_error(d0, d1, p, lambda: _post_atomic(p, 1, e.IBV_WR_ATOMIC_CMP_AND_SWP, p.mr1.buf + 12, 0, 7),
                     e.IBV_WC_REM_INV_REQ_ERR, "ATOMIC CMP_AND_SWP at an address 4 bytes off alignment", c)


def case_atomic_results(d0, d1):
    # The values: FETCH_AND_ADD returns the old value and adds (wrapping);
    # CMP_AND_SWP swaps only on a match and always returns the old value.
    p = Pair(d0, d1)
    v0 = 0xFFFF_FFFF_FFFF_FFF0
    p.mr1.write(b"\x5a" * 24, 24, 56)
    p.mr1.write(v0.to_bytes(8, "little"), 8, 64)
    p.mr0.write(bytes(64), 64, 0)
    a = p.mr1.buf + 64
    _post_atomic(p, 1, e.IBV_WR_ATOMIC_FETCH_AND_ADD, a, 0x20, off=0)   # -> 0x10 (wraps)
    _post_atomic(p, 2, e.IBV_WR_ATOMIC_CMP_AND_SWP, a, 0x11, 0x99, off=8)  # no match
    _post_atomic(p, 3, e.IBV_WR_ATOMIC_CMP_AND_SWP, a, 0x10, 0xABCD, off=16)  # match
    _post_atomic(p, 4, e.IBV_WR_ATOMIC_FETCH_AND_ADD, a, 1, off=24)
    got = expect_wcs(p.cq0, [(i, e.IBV_WC_SUCCESS, op) for i, op in
                             ((1, e.IBV_WC_FETCH_ADD), (2, e.IBV_WC_COMP_SWAP), (3, e.IBV_WC_COMP_SWAP),
                              (4, e.IBV_WC_FETCH_ADD))], "requester, four atomics")
    check(all(w.byte_len == 8 for w in got), "every atomic completion has byte_len 8",
          "; ".join(wc_str(w) for w in got))
    olds = [int.from_bytes(p.mr0.read(8, 8 * i), "little") for i in range(4)]
    check(olds == [v0, 0x10, 0x10, 0xABCD], "the original values returned",
          " ".join(hex(x) for x in olds))
    final = int.from_bytes(p.mr1.read(8, 64), "little")
    check(final == 0xABCE, "the remote value after FETCH_AND_ADD, failed and successful CMP_AND_SWP, FETCH_AND_ADD",
          hex(final))
    check(p.mr1.read(8, 56) == b"\x5a" * 8 and p.mr1.read(8, 72) == b"\x5a" * 8,
          "the 8 bytes before and after are untouched")
    fresh_pair_ok(d0, d1)


def case_zero_length_rkey0(d0, d1):
    # IBA 9.4.4/9.4.5: a zero-length RDMA WRITE or READ accesses no memory,
    # so its R_Key and VA are not checked (mlx5 and rxe do not NAK it).
    # rkey 0 and address 0 here: the WRITE, the READ (its response carries
    # no payload) and a WRITE_WITH_IMM (the receive completes with byte_len
    # 0 and the immediate) all succeed, the QPs stay in RTS and a normal
    # WRITE behind them lands.  retry_cnt 2: a missing response shows up as
    # RETRY_EXC_ERR instead of an endless retry.
    p = Pair(d0, d1, retry_cnt=2)
    c = Counters(d0, d1)
    before = pattern(p.size, 0x21)
    p.mr1.write(before, p.size, 0)
    src = pattern(4096, 0x42)
    p.mr0.write(src, 4096, 8192)
    p.recv(100, 64, 0)
    p.send(1, e.IBV_WR_RDMA_WRITE, 0, 0, raddr=0, rkey=0)
    p.send(2, e.IBV_WR_RDMA_READ, 0, 0, raddr=0, rkey=0)
    p.send(3, e.IBV_WR_RDMA_WRITE_WITH_IMM, 0, 0, raddr=0, rkey=0, imm=0x12345678)
    p.send(4, e.IBV_WR_RDMA_WRITE, 4096, 8192, raddr=p.mr1.buf + 4096, rkey=p.mr1.rkey)
    expect_wcs(p.cq0, [(1, e.IBV_WC_SUCCESS, e.IBV_WC_RDMA_WRITE), (2, e.IBV_WC_SUCCESS, e.IBV_WC_RDMA_READ),
                       (3, e.IBV_WC_SUCCESS, e.IBV_WC_RDMA_WRITE), (4, e.IBV_WC_SUCCESS, e.IBV_WC_RDMA_WRITE)],
               "requester, zero-length WRITE/READ/WRITE_WITH_IMM with rkey 0, then a 4 KiB WRITE")
    got = expect_wcs(p.cq1, [(100, e.IBV_WC_SUCCESS, e.IBV_WC_RECV_RDMA_WITH_IMM)],
                     "responder, the zero-length WRITE_WITH_IMM")
    if got:
        w = got[0]
        check(w.byte_len == 0 and w.wc_flags & e.IBV_WC_WITH_IMM and w.imm_data == 0x12345678,
              "the receive has byte_len 0 and the immediate", wc_str(w))
    expect_state(p.qp0, e.IBV_QPS_RTS, "the requester QP")
    expect_state(p.qp1, e.IBV_QPS_RTS, "the responder QP")
    want = before[:4096] + src + before[8192:]
    check(p.mr1.read(p.size, 0) == want, "responder memory: only the 4 KiB WRITE changed it")
    c.show()
    fresh_pair_ok(d0, d1)


# ---- isolation: keys of other PDs and deregistered keys
# IBA 10.6.3: an L_Key/R_Key is valid only with QPs of the MR's PD, and
# only while the MR is registered.

def _other_pd_mr(d, size, fill):
    """An MR of `size` bytes in a second PD of d's context, filled with
    pattern(size, fill)."""
    pd2 = PD(d.ctx)
    mr = MR(pd2, size, ALL_ACCESS)
    mr.write(pattern(size, fill), size, 0)
    return pd2, mr


def case_lkey_other_pd(d0, d1):
    # The lkey is valid on the same device and context, but of another PD.
    p = Pair(d0, d1)
    c = Counters(d0, d1)
    pd2, mr2 = _other_pd_mr(d0, 4096, 0x55)
    _requester_error(d0, d1, p, lambda: p.send(1, e.IBV_WR_SEND, 1024, 0, lkey=mr2.lkey),
                     e.IBV_WC_LOC_PROT_ERR, "SEND from an MR of another PD (same context)", c)
    # and as the destination of an RDMA READ
    p2 = Pair(d0, d1)
    p2.mr1.write(pattern(4096, 0x66), 4096, 0)
    sge = SGE(mr2.buf, 1024, mr2.lkey)
    wr = SendWR(wr_id=7, opcode=e.IBV_WR_RDMA_READ, num_sge=1, sg=[sge], send_flags=e.IBV_SEND_SIGNALED)
    wr.set_wr_rdma(p2.mr1.rkey, p2.mr1.buf)
    p2.qp0.post_send(wr)
    expect_wcs(p2.cq0, [(7, e.IBV_WC_LOC_PROT_ERR, None)], "RDMA READ into an MR of another PD")
    check(mr2.read(4096, 0) == pattern(4096, 0x55), "the other PD's MR is unchanged")
    mr2.close()
    pd2.close()


def case_rkey_other_pd(d0, d1):
    # The responder has the MR, but in another PD than its QP's.
    p = Pair(d0, d1)
    c = Counters(d0, d1)
    pd2, mr2 = _other_pd_mr(d1, 8192, 0x77)
    _requester_error(d0, d1, p, lambda: p.send(1, e.IBV_WR_RDMA_WRITE, 2048, 0, raddr=mr2.buf, rkey=mr2.rkey),
                     e.IBV_WC_REM_ACCESS_ERR, "RDMA WRITE to an MR in another PD than the responder QP's", c)
    check(mr2.read(8192, 0) == pattern(8192, 0x77), "the other PD's MR is unchanged")
    p2 = Pair(d0, d1)
    p2.mr0.write(pattern(4096, 0x12), 4096, 0)
    p2.send(8, e.IBV_WR_RDMA_READ, 2048, 0, raddr=mr2.buf, rkey=mr2.rkey)
    expect_wcs(p2.cq0, [(8, e.IBV_WC_REM_ACCESS_ERR, None)], "RDMA READ from an MR in another PD")
    check(p2.mr0.read(4096, 0) == pattern(4096, 0x12), "the local READ buffer is unchanged")
    mr2.close()
    pd2.close()


def case_dereg_lkey(d0, d1):
    p = Pair(d0, d1)
    c = Counters(d0, d1)
    gone = MR(d0.pd, 4096, ALL_ACCESS)
    key = gone.lkey
    gone.close()
    _requester_error(d0, d1, p, lambda: p.send(1, e.IBV_WR_SEND, 1024, 0, lkey=key),
                     e.IBV_WC_LOC_PROT_ERR, "SEND with the lkey of a deregistered MR", c)


def case_dereg_rkey(d0, d1):
    p = Pair(d0, d1)
    c = Counters(d0, d1)
    gone = MR(d1.pd, 4096, ALL_ACCESS)
    key, addr = gone.rkey, gone.buf
    gone.close()
    # a new MR may take the same slot: its key must differ (generation)
    again = MR(d1.pd, 4096, ALL_ACCESS)
    check(again.rkey != key, "a new MR does not get the deregistered MR's key",
          f"both {key:#x}")
    _requester_error(d0, d1, p, lambda: p.send(1, e.IBV_WR_RDMA_WRITE, 1024, 0, raddr=addr, rkey=key),
                     e.IBV_WC_REM_ACCESS_ERR, "RDMA WRITE with the rkey of a deregistered MR", c)
    again.close()


CASES = {n[5:]: f for n, f in list(globals().items()) if n.startswith("case_")}


def main():
    args = sys.argv[1:]
    if args == ["--list"]:
        print("\n".join(CASES))
        return
    limit = 150
    if len(args) >= 2 and args[0] == "--limit":
        limit = int(args[1])
        args = args[2:]
    if len(args) < 5:
        sys.exit(f"usage: {sys.argv[0]} [--limit S] DEV0 GID0 DEV1 GID1 CASE... (of: {', '.join(CASES)})")
    dev0, g0, dev1, g1 = args[0], int(args[1]), args[2], int(args[3])
    run_cases({n: settled(c) for n, c in CASES.items()}, args[4:], lambda: (Dev(dev0, g0), Dev(dev1, g1)), limit)


if __name__ == "__main__":
    main()
