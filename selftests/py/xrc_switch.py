#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""An XRC message whose packets name different SRQs.

Usage: xrc_switch.py [--dev rroce9] [--ifname rrtap0]

An XRC target QP on an rroce device over a tap device (py/rx_frags.py's),
with XRC SRQs A and B of one domain and one PD, each with its own CQ; the
initiator is this script, which writes XRC requests (ICRC computed) into
the tap and reads the ACKs back.  Every packet of a message is for the SRQ
its first packet named (a SEND's receive WQE came from it, a WRITE's R_Key
was checked under its PD):
  * SEND_FIRST naming A, then SEND_LAST naming B: the LAST is dropped and
    counted (xrc_bad_srqn +1), no ACK, nothing completes on either CQ
    (until 2026-12-07 the message completed on B's CQ with A's wr_id);
  * SEND_ONLY naming B while A's message is open: dropped and counted too;
  * SEND_LAST naming A at that PSN completes the message: A's CQ, A's
    wr_id, the bytes in A's buffer, the ACK;
  * then SEND_ONLY naming B lands in B's buffer and completes on B's CQ;
  * WRITE_FIRST naming A, WRITE_LAST naming B: dropped and counted;
    WRITE_LAST naming A: the whole WRITE placed, ACKed.
Prints TAP lines; exits 1 if any check failed.
"""
import os
import random
import struct
import sys
import time

import pyverbs.enums as e
from pyverbs.qp import QP, QPInitAttrEx
from pyverbs.wr import RecvWR, SGE

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rclib  # noqa: E402
import rx_frags  # noqa: E402
import xrc  # noqa: E402
from hostile_pkt import bth, reth  # noqa: E402
from taplib import check  # noqa: E402

# XRC opcodes (IBA 9.2: transport 101b)
XRC_SEND_FIRST, XRC_SEND_LAST, XRC_SEND_ONLY = 0xA0, 0xA2, 0xA4
XRC_WRITE_FIRST, XRC_WRITE_LAST = 0xA6, 0xA8
XRC_ACK = 0xB1
MTU = 1024
PEER_QPN = 0x000321


def xrceth(srqn):
    return struct.pack("!I", srqn & 0xFFFFFF)


def counter(dev, name):
    with open(f"/sys/class/infiniband/{dev}/ports/1/hw_counters/{name}") as f:
        return int(f.read())


def wait_counter(dev, name, want, tmo=2.0):
    """The counter once it is `want`, or what it is after tmo seconds
    (ib_core caches hw_counters for a few ms)."""
    deadline = time.monotonic() + tmo
    while (v := counter(dev, name)) != want and time.monotonic() < deadline:
        time.sleep(0.02)
    return v


def run(a, tap):
    d = rx_frags.open_device(a)
    dom = xrc.xrcd(d.ctx)
    cq_a, cq_b = d.cq(16), d.cq(16)
    srq_a, srq_b = xrc.xrc_srq(d.ctx, dom, d.pd, cq_a), xrc.xrc_srq(d.ctx, dom, d.pd, cq_b)
    na, nb = srq_a.get_srq_num(), srq_b.get_srq_num()
    tgt = QP(d.ctx, QPInitAttrEx(qp_type=e.IBV_QPT_XRC_RECV, comp_mask=e.IBV_QP_INIT_ATTR_XRCD, xrcd=dom))
    psn = 2000
    rclib.to_init(tgt)
    rclib.to_rtr(tgt, d, rx_frags.peer(), PEER_QPN, psn, e.IBV_MTU_1024)
    buf_a, buf_b, wmr = d.mr(4 * MTU), d.mr(4 * MTU), d.mr(4 * MTU)
    print(f"# {a.dev} on {a.ifname}: XRC target QP {tgt.qp_num:#x}, SRQs A {na} and B {nb} (one PD, CQs A and B)")
    rnd = random.Random(4791)
    first, last, only = (bytes(rnd.randrange(256) for _ in range(n)) for n in (MTU, 300, 200))

    def send(op, srqn, p, payload, ackreq=0, ext=b""):
        f = tap.frame(bth(op, tgt.qp_num, p, ackreq=ackreq) + xrceth(srqn) + ext + payload)
        tap.write([f[:14], f[14:]])

    def quiet(what, p):
        """Neither CQ has a completion, and no ACK of PSN p or NAK came."""
        ok, _, naks = tap.acks(p, tmo=0.5, ack=XRC_ACK)
        extra = rclib.drain(cq_a, 0.1) + rclib.drain(cq_b, 0.1)
        check(not extra and not ok and naks == 0, what,
              f"completions {[rclib.wc_str(w) for w in extra]}, naks {naks}")

    srq_a.post_recv(RecvWR(wr_id=0xA1, num_sge=1, sg=[SGE(buf_a.buf, 4 * MTU, buf_a.lkey)]))
    srq_b.post_recv(RecvWR(wr_id=0xB1, num_sge=1, sg=[SGE(buf_b.buf, 4 * MTU, buf_b.lkey)]))

    # A SEND opened on A, closed naming B.
    bad0 = counter(a.dev, "xrc_bad_srqn")
    send(XRC_SEND_FIRST, na, psn, first)
    send(XRC_SEND_LAST, nb, psn + 1, last, ackreq=1)
    got = wait_counter(a.dev, "xrc_bad_srqn", bad0 + 1)
    check(got == bad0 + 1, "SEND_FIRST naming SRQ A, SEND_LAST naming SRQ B: the LAST dropped, xrc_bad_srqn +1",
          f"xrc_bad_srqn {bad0} -> {got}")
    quiet("and nothing completes on either CQ, no ACK", psn + 1)
    send(XRC_SEND_ONLY, nb, psn + 1, only, ackreq=1)
    got = wait_counter(a.dev, "xrc_bad_srqn", bad0 + 2)
    check(got == bad0 + 2, "SEND_ONLY naming SRQ B while A's SEND is open: dropped, xrc_bad_srqn +1",
          f"xrc_bad_srqn {bad0} -> {got}")
    quiet("and still nothing completes, no ACK", psn + 1)

    # Closed naming A: the message completes there.
    send(XRC_SEND_LAST, na, psn + 1, last, ackreq=1)
    ok, bad, naks = tap.acks(psn + 1, ack=XRC_ACK)
    wcs = rclib.poll(cq_a, 1, time.monotonic() + 5)
    check(ok and bad == 0 and naks == 0, "SEND_LAST naming SRQ A: ACKed", f"found={ok} bad_icrc={bad} naks={naks}")
    check(len(wcs) == 1 and wcs[0].status == e.IBV_WC_SUCCESS and wcs[0].wr_id == 0xA1
          and wcs[0].byte_len == MTU + len(last) and buf_a.read(MTU + len(last), 0) == first + last,
          "the SEND completes on A's CQ with A's receive, every byte in A's buffer",
          " ".join(rclib.wc_str(w) for w in wcs))
    psn += 2

    # A new message may name another SRQ.
    send(XRC_SEND_ONLY, nb, psn, only, ackreq=1)
    ok, bad, naks = tap.acks(psn, ack=XRC_ACK)
    wcs = rclib.poll(cq_b, 1, time.monotonic() + 5)
    check(ok and len(wcs) == 1 and wcs[0].status == e.IBV_WC_SUCCESS and wcs[0].wr_id == 0xB1
          and buf_b.read(len(only), 0) == only,
          "then a SEND_ONLY naming SRQ B: ACKed, completes on B's CQ, bytes in B's buffer",
          f"found={ok} naks={naks} " + " ".join(rclib.wc_str(w) for w in wcs))
    psn += 1

    # A WRITE opened on A, closed naming B, then naming A.
    wfirst, wlast = bytes(rnd.randrange(256) for _ in range(MTU)), bytes(rnd.randrange(256) for _ in range(100))
    bad0 = counter(a.dev, "xrc_bad_srqn")
    send(XRC_WRITE_FIRST, na, psn, wfirst, ext=reth(wmr.buf, wmr.rkey, MTU + len(wlast)))
    send(XRC_WRITE_LAST, nb, psn + 1, wlast, ackreq=1)
    got = wait_counter(a.dev, "xrc_bad_srqn", bad0 + 1)
    check(got == bad0 + 1, "WRITE_FIRST naming SRQ A, WRITE_LAST naming SRQ B: the LAST dropped, xrc_bad_srqn +1",
          f"xrc_bad_srqn {bad0} -> {got}")
    quiet("and no ACK", psn + 1)
    send(XRC_WRITE_LAST, na, psn + 1, wlast, ackreq=1)
    ok, bad, naks = tap.acks(psn + 1, ack=XRC_ACK)
    check(ok and naks == 0 and wmr.read(MTU + len(wlast), 0) == wfirst + wlast,
          "WRITE_LAST naming SRQ A: ACKed, the whole WRITE placed", f"found={ok} naks={naks}")
    tgt.close()
    d.close()


if __name__ == "__main__":
    rx_frags.on_tap_device(run)
