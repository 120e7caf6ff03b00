#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""IBTA 1.5 ATOMIC WRITE between two devices in one process, checked.

Usage: atomic_write.py DEV0 GID0 DEV1 GID1 [--count N] [--legacy]

An RC QP pair (extended QPs with IBV_QP_EX_WITH_ATOMIC_WRITE) is connected
DEV0 -> DEV1.  DEV0 posts N ATOMIC WRITEs (ibv_wr_atomic_write; with
--legacy ibv_post_send with IBV_WR_ATOMIC_WRITE and one 8-byte SGE naming
the value, as rdma-core's providers take it) of random 8-byte values to
distinct aligned words of a region of DEV1 (IBV_ACCESS_REMOTE_WRITE only),
half of them unsignaled, and checks:
  * every signaled one completes with SUCCESS and opcode IBV_WC_ATOMIC_WRITE
    in posting order, and nothing else completes;
  * every word of DEV1's region holds its value, every other byte is
    untouched;
  * a region without remote write access (REMOTE_READ|REMOTE_ATOMIC) is
    refused: the WR completes with IBV_WC_REM_ACCESS_ERR and the target is
    untouched (a second QP pair; that QP is in error afterwards).
Works with either end being rroce or rdma_rxe (interop both ways).  Prints
one line per check; exits 1 at the first mismatch, 0 if all held.
"""
import argparse
import random
import sys
import time

import pyverbs.enums as e
from pyverbs.mr import MR
from pyverbs.qp import QPCap, QPEx, QPInitAttrEx
from pyverbs.wr import SGE, SendWR

import rclib
from rclib import Dev, status_str, wc_str

WORDS = 64


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def qp_ex(d, cq, depth):
    cap = QPCap(max_send_wr=depth, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
    qia = QPInitAttrEx(cap=cap, qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, pd=d.pd,
                       send_ops_flags=e.IBV_QP_EX_WITH_ATOMIC_WRITE | e.IBV_QP_EX_WITH_SEND,
                       comp_mask=e.IBV_QP_INIT_ATTR_PD | e.IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)
    return QPEx(d.ctx, qia)


def post(qp, legacy, src, wr_id, rkey, raddr, value, signaled):
    flags = e.IBV_SEND_SIGNALED if signaled else 0
    if legacy:
        src.write(value, 8, 0)
        wr = SendWR(wr_id=wr_id, opcode=e.IBV_WR_ATOMIC_WRITE, num_sge=1,
                    sg=[SGE(src.buf, 8, src.lkey)], send_flags=flags)
        wr.set_wr_rdma(rkey, raddr)
        qp.post_send(wr)
        return
    qp.wr_start()
    qp.wr_id = wr_id
    qp.wr_flags = flags
    qp.wr_atomic_write(rkey, raddr, value)
    qp.wr_complete()


def pair(d0, d1, cq0, cq1, depth, mtu):
    q0, q1 = qp_ex(d0, cq0, depth), qp_ex(d1, cq1, depth)
    p0, p1 = random.getrandbits(24), random.getrandbits(24)
    rclib.connect(d0, q0, p0, d1, q1, p1, mtu)
    return q0, q1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dev0")
    ap.add_argument("gid0", type=int)
    ap.add_argument("dev1")
    ap.add_argument("gid1", type=int)
    ap.add_argument("--count", type=int, default=WORDS)
    ap.add_argument("--legacy", action="store_true")
    a = ap.parse_args()
    n = min(a.count, WORDS)
    d0, d1 = Dev(a.dev0, a.gid0), Dev(a.dev1, a.gid1)
    mtu = min(d0.active_mtu(), d1.active_mtu())
    cq0, cq1 = d0.cq(2 * WORDS), d1.cq(2 * WORDS)
    q0, _q1 = pair(d0, d1, cq0, cq1, 2 * WORDS, mtu)
    api = "ibv_post_send" if a.legacy else "ibv_wr_atomic_write"

    # The target: WORDS words after a guard word, background pattern.
    size = 8 * (WORDS + 2)
    tgt = MR(d1.pd, size, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE)
    bg = bytes(random.getrandbits(8) for _ in range(size))
    tgt.write(bg, size, 0)
    src = MR(d0.pd, 8, e.IBV_ACCESS_LOCAL_WRITE)
    want = bytearray(bg)
    signaled = []
    for i in range(n):
        v = random.getrandbits(64).to_bytes(8, "little")
        off = 8 * (1 + i)
        want[off:off + 8] = v
        sig = i % 2 == 0 or i == n - 1
        if sig:
            signaled.append(i)
        post(q0, a.legacy, src, i, tgt.rkey, tgt.buf + off, v, sig)
        if a.legacy:
            # the value is read at post time: the source may change now
            src.write(b"\xee" * 8, 8, 0)
    wcs = rclib.poll(cq0, len(signaled), time.monotonic() + 60)
    if len(wcs) != len(signaled):
        fail(f"{len(wcs)} of {len(signaled)} completions ({[wc_str(w) for w in wcs]})")
    for wc, i in zip(wcs, signaled):
        if wc.status != e.IBV_WC_SUCCESS or wc.opcode != e.IBV_WC_ATOMIC_WRITE or wc.wr_id != i:
            fail(f"completion of wr {i}: {wc_str(wc)}")
    extra = rclib.drain(cq0) + rclib.drain(cq1)
    if extra:
        fail(f"extra completions: {[wc_str(w) for w in extra]}")
    got = tgt.read(size, 0)
    if got != bytes(want):
        off, nd = rclib.first_diff(got, bytes(want))
        fail(f"target memory: first difference at byte {off}, {nd} bytes differ")
    print(f"ok: {n} ATOMIC WRITEs {a.dev0} -> {a.dev1} ({api}), {len(signaled)} completions "
          f"IBV_WC_ATOMIC_WRITE, every word in place, guard bytes untouched")

    # No remote write access: remote access error, target untouched.
    ro = MR(d1.pd, 16, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_READ | e.IBV_ACCESS_REMOTE_ATOMIC)
    ro.write(b"\x5a" * 16, 16, 0)
    r0, _r1 = pair(d0, d1, cq0, cq1, 4, mtu)
    post(r0, a.legacy, src, 0x77, ro.rkey, ro.buf, b"\x01" * 8, True)
    wcs = rclib.poll(cq0, 1, time.monotonic() + 60)
    if len(wcs) != 1 or wcs[0].wr_id != 0x77 or wcs[0].status != e.IBV_WC_REM_ACCESS_ERR:
        fail(f"without REMOTE_WRITE: {[wc_str(w) for w in wcs]} (want REM_ACCESS_ERR)")
    if ro.read(16, 0) != b"\x5a" * 16:
        fail("a region without remote write access was written")
    rclib.drain(cq0)
    rclib.drain(cq1)
    print(f"ok: a region without IBV_ACCESS_REMOTE_WRITE: {status_str(wcs[0].status)}, untouched")
    return 0


if __name__ == "__main__":
    sys.exit(main())
