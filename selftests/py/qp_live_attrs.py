#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Attributes changed by modify_qp in RTS reach the wire.

Usage: qp_live_attrs.py [--dev rroce9] [--ifname rrtap0]

An RC QP on an rroce device over a tap device (py/rx_frags.py's), whose
peer is this script: it writes SEND requests into the tap and reads the
responder's answers back.  With no receive posted, the SEND is RNR-NAKed
with the QP's min_rnr_timer (12); after modify_qp RTS -> RTS with
IBV_QP_MIN_RNR_TIMER 20, the same SEND is NAKed with timer 20 (until
2026-12-07 the responder kept the timer of RTR); with a receive posted it
is ACKed and received.
Prints TAP lines; exits 1 if any check failed.
"""
import os
import struct
import sys
import time

import pyverbs.enums as e
from pyverbs.wr import RecvWR, SGE

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rclib  # noqa: E402
import rx_frags  # noqa: E402
from hostile_pkt import ACK, SEND_ONLY, bth  # noqa: E402
from taplib import check  # noqa: E402


def answer(tap, psn, tmo=5.0):
    """The AETH syndrome of the responder's answer for `psn`, or None."""
    for roce in rx_frags.roce_frames(tap, tmo):
        if roce[0] == ACK and struct.unpack("!I", roce[8:12])[0] & 0xFFFFFF == psn:
            return roce[12]
    return None


def run(a, tap):
    d, cq, qp, _mr, rbuf = rx_frags.connect(a)
    psn = 1000
    payload = bytes(range(64))

    def send():
        f = tap.frame(bth(SEND_ONLY, qp.qp_num, psn, ackreq=1) + payload)
        tap.write([f[:14], f[14:]])
        return answer(tap, psn)

    syn = send()
    check(syn == 0x20 | 12, "SEND with no receive posted: RNR NAK with min_rnr_timer 12",
          f"syndrome {syn!r:}")
    qp.modify(rclib.qp_attr(e.IBV_QPS_RTS, min_rnr_timer=20), e.IBV_QP_STATE | e.IBV_QP_MIN_RNR_TIMER)
    attr, _ = qp.query(e.IBV_QP_MIN_RNR_TIMER)
    syn = send()
    check(attr.min_rnr_timer == 20 and syn == 0x20 | 20,
          "after modify_qp RTS -> RTS with min_rnr_timer 20: the RNR NAK carries timer 20",
          f"query {attr.min_rnr_timer}, syndrome {syn!r}")
    qp.post_recv(RecvWR(wr_id=1, num_sge=1, sg=[SGE(rbuf.buf, len(payload), rbuf.lkey)]))
    syn = send()
    wcs = rclib.poll(cq, 1, time.monotonic() + 5)
    check(syn is not None and syn >> 5 == 0 and len(wcs) == 1 and wcs[0].status == e.IBV_WC_SUCCESS
          and rbuf.read(len(payload), 0) == payload,
          "with a receive posted: ACKed and received", f"syndrome {syn!r}, {[rclib.wc_str(w) for w in wcs]}")
    qp.close()
    d.close()


if __name__ == "__main__":
    rx_frags.on_tap_device(run)
