#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""On-demand paging seen from the wire: an atomic out of sequence.

Usage: odp_wire.py [--dev rroce9] [--ifname rrtap0]

An RC QP on an rroce device over a tap device (py/rx_frags.py's), whose
peer is this script, and an on-demand paging region over memory nobody has
touched.  The script "loses" a WRITE at PSN p and sends a FETCH_ADD to the
region at p+1 and a WRITE at p+2: the responder must answer with a
sequence NAK for p, not stall on the atomic's missing page (the RNR NAK
such a stall sends for p+1 when p+2 arrives acknowledged p, which it never
received: until 2026-12-07 the lost WRITE completed with success at the
requester), and must not touch the word.
Then the WRITE and the FETCH_ADD in order: both ACKed, the atomic executed
once (the original value 0 returned, the word 5 once the fault is in).
Prints TAP lines; exits 1 if any check failed.
"""
import os
import struct
import sys
import time

from pyverbs.mr import MR

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import odp  # noqa: E402
import rclib  # noqa: E402
import rx_frags  # noqa: E402
from hostile_pkt import ACK, ATOMIC_ACK, FETCH_ADD, WRITE_ONLY, atomiceth, bth, reth  # noqa: E402
from qp_live_attrs import answer  # noqa: E402
from taplib import check  # noqa: E402

MiB = 1 << 20


def run(a, tap):
    d, cq, qp, mr, _rbuf = rx_frags.connect(a)
    mem = odp.mmap(MiB)
    omr = MR(d.pd, MiB, odp.ODP, address=mem)
    p = 1000

    def send(hdrs, payload=b""):
        f = tap.frame(hdrs + payload)
        tap.write([f[:14], f[14:]])

    data = bytes(range(64))
    # The WRITE at p is "lost"; the FETCH_ADD at p+1 arrives, and a WRITE
    # at p+2 right behind it (a stall would answer that with an RNR NAK
    # for p+1).
    send(bth(FETCH_ADD, qp.qp_num, p + 1, ackreq=1) + atomiceth(mem, omr.rkey, 5))
    send(bth(WRITE_ONLY, qp.qp_num, p + 2, ackreq=1) + reth(mr.buf + 64, mr.rkey, len(data)), data)
    got = answers(tap, 3)
    check(got and got[0] == (p, 0x60) and all(s >> 5 != 1 for _, s in got),
          "FETCH_ADD after a lost WRITE, to an on-demand page not faulted in: sequence NAK for the lost PSN, "
          "no RNR NAK", f"answers (psn, syndrome) {got}")
    check(odp.peek(mem, 8) == bytes(8), "the word is untouched")
    # Now in order.
    send(bth(WRITE_ONLY, qp.qp_num, p, ackreq=1) + reth(mr.buf, mr.rkey, len(data)), data)
    syn_w = answer(tap, p, tmo=5)
    send(bth(FETCH_ADD, qp.qp_num, p + 1, ackreq=1) + atomiceth(mem, omr.rkey, 5))
    # The atomic may stall on the page (an RNR NAK for p+1, now right) and
    # needs a retransmission then: resend until its ATOMIC ACK comes.
    orig = None
    end = time.monotonic() + 30
    while orig is None and time.monotonic() < end:
        orig = atomic_ack(tap, p + 1, 1.0)
        if orig is None:
            send(bth(FETCH_ADD, qp.qp_num, p + 1, ackreq=1) + atomiceth(mem, omr.rkey, 5))
    check(syn_w is not None and syn_w >> 5 == 0 and mr.read(len(data), 0) == data,
          "then the WRITE: ACKed, placed", f"syndrome {syn_w!r}")
    word = struct.unpack("<Q", odp.peek(mem, 8))[0]
    check(orig == 0 and word == 5, "and the FETCH_ADD: original 0 returned, the word 5 (executed once)",
          f"original {orig!r}, word {word}")
    omr.close()
    qp.close()
    d.close()


def answers(tap, tmo):
    """(PSN, AETH syndrome) of every ACK/NAK read within tmo seconds."""
    return [(struct.unpack("!I", roce[8:12])[0] & 0xFFFFFF, roce[12])
            for roce in rx_frags.roce_frames(tap, tmo) if roce[0] == ACK]


def atomic_ack(tap, psn, tmo):
    """The original value of the ATOMIC ACK for `psn`, or None."""
    for roce in rx_frags.roce_frames(tap, tmo):
        if roce[0] == ATOMIC_ACK and struct.unpack("!I", roce[8:12])[0] & 0xFFFFFF == psn:
            return struct.unpack("!Q", roce[16:24])[0]
    return None


if __name__ == "__main__":
    rx_frags.on_tap_device(run)
