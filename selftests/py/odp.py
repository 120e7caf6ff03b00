#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""On-demand paging (IBV_ACCESS_ON_DEMAND) regions, checked byte by byte.

Usage: odp.py DEV0 GID0 DEV1 GID1 [--mib N]

DEV0 is the requester, DEV1 (its peer) owns the on-demand regions unless
said otherwise.  Every region lies over anonymous memory this process maps
with mmap and has not touched when it registers it, so the device finds no
page and must fault each one in.  Checks:
  * registration pins nothing (VmPin unchanged) and faults nothing in
    (none of the mapping's pages is resident, mincore), unlike a pinned region (control);
  * an N MiB (default 16) RDMA WRITE lands in never-touched memory, byte for byte, and
    the responder counted its page faults (odp_faults);
  * RDMA READ of never-touched memory gives zeros (the zero page), and a
    WRITE there afterwards needs writable pages and lands;
  * the process frees the memory behind a region and maps new memory at
    the same address: READ sees the new bytes (the old pages were
    invalidated), a WRITE lands in the new memory;
  * a multi-packet SEND from a never-touched source into a never-touched
    receive buffer, both on demand, and a SEND into one with SRQ;
  * a UC SEND from a never-touched source arrives intact;
  * a UD receive into memory that cannot be faulted in completes with
    LOC_PROT_ERR, and the next receive gets a datagram;
  * compare-and-swap and fetch-and-add on never-touched memory;
  * an implicit region (the whole address space): WRITE and READ through
    its key at addresses of two separate mappings;
  * ibv_advise_mr(PREFETCH_WRITE) faults the range in (mincore), so the WRITE
    that follows needs no fault;
  * the process replaces the memory behind a faulted-in region with an
    inaccessible (PROT_NONE) mapping: a WRITE gets REM_ACCESS_ERR (no page
    can be faulted in), nothing crashes;
  * the implicit region ends where user space ends: ibv_advise_mr at the
    last page before 2^64 or at a kernel address is EINVAL, a WRITE to the
    last page REM_ACCESS_ERR, and the region keeps working;
  * an implicit region with 8,192 chunks (2 MiB) holding pages refuses one
    more (ENOMEM); once the process unmapped them, they make room.
Prints TAP lines; exits 1 if any check failed.
"""
import argparse
import ctypes
import errno
import os
import random
import sys
import time

import pyverbs.enums as e
from pyverbs.mr import MR
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.srq import SRQ, SrqInitAttr, SrqAttr
from pyverbs.wr import RecvWR, SGE, SendWR

import rclib
import taplib
import uc_checks
import ud_errors
from rclib import Dev, wc_str
from taplib import check

MiB = 1 << 20
ODP = e.IBV_ACCESS_ON_DEMAND | rclib.ALL_ACCESS
TMO = 180

libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
PROT_NONE, PROT_RW, MAP_PRIVATE, MAP_ANON, MAP_FIXED, MAP_NORESERVE = 0, 3, 2, 0x20, 0x10, 0x4000


def mmap(size, at=None, prot=PROT_RW, flags=0):
    """Anonymous memory; at an address: in place of what is mapped there
    (one call, so no other mapping can take the address in between)."""
    flags |= MAP_PRIVATE | MAP_ANON | (MAP_FIXED if at else 0)
    a = libc.mmap(at, size, prot, flags, -1, 0)
    if a in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), "mmap")
    return a


def munmap(a, size):
    if libc.munmap(a, size) != 0:
        raise OSError(ctypes.get_errno(), "munmap")


def peek(a, n):
    return ctypes.string_at(a, n)


def poke(a, data):
    ctypes.memmove(a, data, len(data))


libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]


def resident_kb(a, n):
    """How much of the n bytes at a (page-aligned) is in memory (mincore:
    the mapping itself may have been merged with its neighbours)."""
    pages = (n + 4095) // 4096
    vec = ctypes.create_string_buffer(pages)
    if libc.mincore(a, n, vec) != 0:
        raise OSError(ctypes.get_errno(), "mincore")
    return 4 * sum(b & 1 for b in vec.raw)


def counter(dev, name):
    try:
        with open(f"/sys/class/infiniband/{dev}/ports/1/hw_counters/{name}") as f:
            return int(f.read())
    except OSError:
        return -1


class Pair:
    """An RC QP pair DEV0 -> DEV1 and its CQs."""

    def __init__(self, d0, d1, srq=None):
        self.cq0, self.cq1 = d0.cq(64), d1.cq(64)
        self.q0 = d0.qp(self.cq0, self.cq0, send_wr=16, recv_wr=16)
        if srq is None:
            self.q1 = d1.qp(self.cq1, self.cq1, send_wr=16, recv_wr=16)
        else:
            cap = QPCap(max_send_wr=16, max_recv_wr=16, max_send_sge=1, max_recv_sge=1)
            self.q1 = QP(d1.pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.cq1, rcq=self.cq1, srq=srq, cap=cap))
        mtu = min(d0.active_mtu(), d1.active_mtu())
        rclib.connect(d0, self.q0, random.getrandbits(24), d1, self.q1, random.getrandbits(24), mtu)

    def post(self, opcode, sge, rkey=0, raddr=0, wr_id=1, atomic=None):
        wr = SendWR(wr_id=wr_id, opcode=opcode, num_sge=1, sg=[sge], send_flags=e.IBV_SEND_SIGNALED)
        if atomic is not None:
            wr.set_wr_atomic(rkey, raddr, atomic[0], atomic[1])
        elif rkey:
            wr.set_wr_rdma(rkey, raddr)
        self.q0.post_send(wr)

    def wait(self, cq, wr_id=1):
        wcs = rclib.poll(cq, 1, time.monotonic() + TMO)
        if len(wcs) != 1:
            return f"no completion within {TMO}s"
        wc = wcs[0]
        if wc.wr_id != wr_id or wc.status != e.IBV_WC_SUCCESS:
            return wc_str(wc)
        return None


def xfer(p, opcode, local, length, rkey, raddr, loff=0):
    p.post(opcode, SGE(local.buf + loff, length, local.lkey), rkey, raddr)
    return p.wait(p.cq0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dev0")
    ap.add_argument("gid0", type=int)
    ap.add_argument("dev1")
    ap.add_argument("gid1", type=int)
    ap.add_argument("--mib", type=int, default=16)
    a = ap.parse_args()
    big = max(a.mib, 4) * MiB
    d0, d1 = Dev(a.dev0, a.gid0), Dev(a.dev1, a.gid1)
    p = Pair(d0, d1)
    src = MR(d0.pd, big, rclib.ALL_ACCESS)
    dst = MR(d0.pd, big, rclib.ALL_ACCESS)

    # --- registration faults nothing in and pins nothing
    size = big
    mem = mmap(size)
    pin0 = taplib.vm_pin_kb()
    mr = MR(d1.pd, size, ODP, address=mem)
    check(resident_kb(mem, size) == 0 and taplib.vm_pin_kb() == pin0,
          f"an on-demand region over {size >> 20} MiB of untouched memory: nothing faulted in, nothing pinned",
          f"resident {resident_kb(mem, size)} kB, VmPin {pin0} -> {taplib.vm_pin_kb()} kB")
    ctl = mmap(MiB)
    pinned = MR(d1.pd, MiB, rclib.ALL_ACCESS, address=ctl)
    check(taplib.vm_pin_kb() >= pin0 + 1024, "control: a pinned 1 MiB region shows in VmPin",
          f"VmPin {pin0} -> {taplib.vm_pin_kb()} kB")
    pinned.close()
    munmap(ctl, MiB)

    # --- a 16 MiB WRITE into it
    data = os.urandom(size)
    src.write(data, size, 0)
    f0 = counter(a.dev1, "odp_faults")
    err = xfer(p, e.IBV_WR_RDMA_WRITE, src, size, mr.rkey, mem)
    f1 = counter(a.dev1, "odp_faults")
    check(err is None and peek(mem, size) == data,
          f"RDMA WRITE of {size >> 20} MiB into never-touched on-demand memory: every byte in place",
          err or f"first difference at {rclib.first_diff(peek(mem, size), data)}")
    check(f1 > f0, f"the responder faulted the pages in: odp_faults {f0} -> {f1}")
    check(taplib.vm_pin_kb() == pin0, "still nothing pinned", f"VmPin {taplib.vm_pin_kb()} kB")

    # --- READ of untouched memory: zeros; then a WRITE needs writable pages
    zmem = mmap(4 * MiB)
    zmr = MR(d1.pd, 4 * MiB, ODP, address=zmem)
    dst.write(b"\xa5" * (4 * MiB), 4 * MiB, 0)
    err = xfer(p, e.IBV_WR_RDMA_READ, dst, 4 * MiB, zmr.rkey, zmem)
    check(err is None and dst.read(4 * MiB, 0) == bytes(4 * MiB),
          "RDMA READ of 4 MiB of never-touched on-demand memory: zeros", err or "not zeros")
    part = os.urandom(MiB)
    src.write(part, MiB, 0)
    err = xfer(p, e.IBV_WR_RDMA_WRITE, src, MiB, zmr.rkey, zmem + MiB)
    check(err is None and peek(zmem + MiB, MiB) == part and peek(zmem, MiB) == bytes(MiB),
          "then a WRITE into the pages read before (mapped read-only): in place, the rest still zero",
          err or "mismatch")

    # --- free and reallocate the memory behind the region
    old = os.urandom(MiB)
    poke(mem, old)
    err = xfer(p, e.IBV_WR_RDMA_READ, dst, MiB, mr.rkey, mem)
    ok = err is None and dst.read(MiB, 0) == old
    again = mmap(size, at=mem)   # frees the old pages
    new = os.urandom(MiB)
    poke(mem, new)
    err2 = xfer(p, e.IBV_WR_RDMA_READ, dst, MiB, mr.rkey, mem)
    check(ok and again == mem and err2 is None and dst.read(MiB, 0) == new,
          "memory freed and mapped again at the same address: READ gives the new bytes, not the old pages",
          err or err2 or ("old bytes" if dst.read(MiB, 0) == old else "mismatch"))
    part = os.urandom(size // 4)
    src.write(part, size // 4, 0)
    err = xfer(p, e.IBV_WR_RDMA_WRITE, src, size // 4, mr.rkey, mem + size // 2)
    check(err is None and peek(mem + size // 2, size // 4) == part, "and a WRITE lands in the new memory", err or "")

    # --- SEND from and into never-touched memory
    smem, rmem = mmap(2 * MiB), mmap(2 * MiB)
    smr = MR(d0.pd, 2 * MiB, ODP, address=smem)
    rmr = MR(d1.pd, 2 * MiB, ODP, address=rmem)
    msg = os.urandom(MiB + 12345)
    poke(smem, msg)   # the CPU faults the source in; the device has not
    p.q1.post_recv(RecvWR(wr_id=7, num_sge=1, sg=[SGE(rmem, 2 * MiB, rmr.lkey)]))
    p.post(e.IBV_WR_SEND, SGE(smem, len(msg), smr.lkey), wr_id=8)
    err = p.wait(p.cq0, 8) or p.wait(p.cq1, 7)
    check(err is None and peek(rmem, len(msg)) == msg,
          f"SEND of {len(msg)} bytes, on-demand source and receive buffer: in place", err or "mismatch")
    # UC (no retransmission): the first send from a source the device has
    # not faulted in.  Until 2026-12-07 its first packet, stalled on the
    # page, was skipped: the message never arrived, yet the send completed
    # with success.
    up = uc_checks.UcPair(d0, d1, MiB)
    umem = mmap(MiB)
    umr = MR(d0.pd, MiB, ODP, address=umem)
    msg = os.urandom(5000)
    poke(umem, msg)
    up.recv(11, MiB)
    up.qp0.post_send(SendWR(wr_id=12, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(umem, len(msg), umr.lkey)],
                            send_flags=e.IBV_SEND_SIGNALED))
    s = rclib.poll(up.cq0, 1, time.monotonic() + TMO)
    r = rclib.poll(up.cq1, 1, time.monotonic() + 30)
    check(len(s) == 1 and s[0].status == e.IBV_WC_SUCCESS and len(r) == 1 and r[0].status == e.IBV_WC_SUCCESS
          and r[0].byte_len == len(msg) and up.mr1.read(len(msg), 0) == msg,
          f"UC SEND of {len(msg)} bytes from an on-demand source not faulted in: received intact",
          f"send {[wc_str(w) for w in s]}, receive {[wc_str(w) for w in r]}")
    srq = SRQ(d1.pd, SrqInitAttr(SrqAttr(max_wr=16, max_sge=1)))
    ps = Pair(d0, d1, srq=srq)
    qmem = mmap(MiB)
    qmr = MR(d1.pd, MiB, ODP, address=qmem)
    srq.post_recv(RecvWR(wr_id=9, num_sge=1, sg=[SGE(qmem, MiB, qmr.lkey)]))
    msg = os.urandom(300000)
    src.write(msg, len(msg), 0)
    ps.post(e.IBV_WR_SEND, SGE(src.buf, len(msg), src.lkey), wr_id=10)
    err = ps.wait(ps.cq0, 10) or ps.wait(ps.cq1, 9)
    check(err is None and peek(qmem, len(msg)) == msg, "SEND into an on-demand buffer from an SRQ: in place",
          err or "mismatch")

    # --- atomics on never-touched memory
    amem = mmap(MiB)
    amr = MR(d1.pd, MiB, ODP, address=amem)
    p.post(e.IBV_WR_ATOMIC_FETCH_AND_ADD, SGE(dst.buf, 8, dst.lkey), amr.rkey, amem + 4096, atomic=(5, 0))
    err = p.wait(p.cq0)
    orig1 = int.from_bytes(dst.read(8, 0), "little")
    p.post(e.IBV_WR_ATOMIC_CMP_AND_SWP, SGE(dst.buf, 8, dst.lkey), amr.rkey, amem + 4096, atomic=(5, 7))
    err2 = p.wait(p.cq0)
    orig2 = int.from_bytes(dst.read(8, 0), "little")
    word = int.from_bytes(peek(amem + 4096, 8), "little")
    check(err is None and err2 is None and (orig1, orig2, word) == (0, 5, 7),
          "fetch-and-add then compare-and-swap on never-touched on-demand memory: 0, 5, then 7 in place",
          err or err2 or f"originals {orig1}, {orig2}, word {word}")

    # --- an implicit region
    imr = MR(d1.pd, 0, ODP, implicit=True)
    m1, m2 = mmap(4 * MiB), mmap(MiB)
    part = os.urandom(4 * MiB)
    src.write(part, 4 * MiB, 0)
    err = xfer(p, e.IBV_WR_RDMA_WRITE, src, 4 * MiB, imr.rkey, m1)
    poke(m2, b"implicit" * 1000)
    err2 = xfer(p, e.IBV_WR_RDMA_READ, dst, 8000, imr.rkey, m2)
    check(err is None and err2 is None and peek(m1, 4 * MiB) == part and dst.read(8000, 0) == b"implicit" * 1000,
          "implicit on-demand region: WRITE and READ at two mappings through its one key", err or err2 or "mismatch")

    # --- prefetch
    pmem = mmap(2 * MiB)
    pmr = MR(d1.pd, 2 * MiB, ODP, address=pmem)
    d1.pd.advise_mr(e._IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, e._IBV_ADVISE_MR_FLAG_FLUSH,
                    [SGE(pmem, 2 * MiB, pmr.lkey)])
    rss = resident_kb(pmem, 2 * MiB)
    f0 = counter(a.dev1, "odp_faults")
    part = os.urandom(2 * MiB)
    src.write(part, 2 * MiB, 0)
    err = xfer(p, e.IBV_WR_RDMA_WRITE, src, 2 * MiB, pmr.rkey, pmem)
    f1 = counter(a.dev1, "odp_faults")
    check(rss == 2048 and err is None and f1 == f0 and peek(pmem, 2 * MiB) == part,
          "ibv_advise_mr(PREFETCH_WRITE) faults 2 MiB in; the WRITE after it needs no fault",
          err or f"resident {rss} kB, odp_faults {f0} -> {f1}")

    # --- memory the process took away: remote access error, nothing else.
    # Not a bare munmap: the next mmap of this process (a Python arena is
    # 1 MiB, the provider's rings) may take the hole, and the region would
    # then rightly reach whatever lives there (the 2026-12-05 CI run: a
    # WRITE landed in a new arena and python3 died of a general protection
    # fault).  An inaccessible mapping in its place keeps the address.
    p2 = Pair(d0, d1)
    hmem = mmap(MiB)
    hmr = MR(d1.pd, MiB, ODP, address=hmem)
    poke(hmem, b"x" * MiB)
    d1.pd.advise_mr(e._IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, e._IBV_ADVISE_MR_FLAG_FLUSH,
                    [SGE(hmem, MiB, hmr.lkey)])
    check(mmap(MiB, at=hmem, prot=PROT_NONE) == hmem and resident_kb(hmem, MiB) == 0,
          "the memory behind a faulted-in region replaced by an inaccessible mapping: its pages are gone")
    def naked(pair, opcode, sge, what):
        a0 = counter(a.dev1, "access_naks_sent")
        pair.post(opcode, sge, hmr.rkey, hmem)
        wcs = rclib.poll(pair.cq0, 1, time.monotonic() + TMO)
        # The responder adds its engine's counts to the device's after it
        # sent the NAK: the requester may complete first.
        end = time.monotonic() + 5
        while (a1 := counter(a.dev1, "access_naks_sent")) == a0 and time.monotonic() < end:
            time.sleep(0.05)
        check(len(wcs) == 1 and wcs[0].status == e.IBV_WC_REM_ACCESS_ERR and a1 == a0 + 1,
              f"{what} a region whose memory became inaccessible: REM_ACCESS_ERR (NAK counted)",
              f"{[wc_str(w) for w in wcs]}, access_naks_sent {a0} -> {a1}")

    naked(p2, e.IBV_WR_RDMA_WRITE, SGE(src.buf, 4096, src.lkey), "WRITE into")
    # A READ of it: a NAK too (until 2026-12-07 its responses were dropped
    # and the requester ran out of retries, RETRY_EXC_ERR).
    naked(Pair(d0, d1), e.IBV_WR_RDMA_READ, SGE(dst.buf, 4096, dst.lkey), "READ of")
    # The first pair is unharmed.
    err = xfer(p, e.IBV_WR_RDMA_WRITE, src, 4096, mr.rkey, mem)
    check(err is None and peek(mem, 4096) == src.read(4096, 0), "the other QP pair still works", err or "")

    # --- UD: a receive into memory that cannot be faulted in completes
    # with LOC_PROT_ERR (at the next datagram that misses it), and the
    # QP goes on.  Until 2026-12-07 every datagram stalled on it again:
    # the receive never completed and the QP received nothing more.
    cu0, cu1 = d0.cq(16), d1.cq(16)
    u0, u1 = ud_errors.ud_qp(d0, cu0), ud_errors.ud_qp(d1, cu1)
    to1 = ud_errors.ah(d0, d1.gid)
    bmem = mmap(MiB)
    bmr = MR(d1.pd, MiB, ODP, address=bmem)
    mmap(MiB, at=bmem, prot=PROT_NONE)
    gmr = d1.mr(4096)
    u1.post_recv(RecvWR(wr_id=40, num_sge=1, sg=[SGE(bmem, 4096, bmr.lkey)]))
    u1.post_recv(RecvWR(wr_id=41, num_sge=1, sg=[SGE(gmr.buf, 4096, gmr.lkey)]))
    got = []
    for i in range(8):
        w = SendWR(wr_id=50 + i, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(src.buf, 64, src.lkey)],
                   send_flags=e.IBV_SEND_SIGNALED)
        w.set_wr_ud(to1, u1.qp_num, ud_errors.QKEY)
        u0.post_send(w)
        rclib.poll(cu0, 1, time.monotonic() + TMO)
        time.sleep(0.2)
        got += rclib.drain(cu1, 0.1)
        if any(c.wr_id == 41 for c in got):
            break
    check([(c.wr_id, c.status) for c in got] == [(40, e.IBV_WC_LOC_PROT_ERR), (41, e.IBV_WC_SUCCESS)],
          "UD receive into memory that cannot be faulted in: LOC_PROT_ERR, then the next receive gets a datagram",
          f"{[wc_str(c) for c in got]}")

    # --- an implicit region covers user space only: the kernel's half of
    # the addresses, and the last page before 2^64 (where its 2 MiB chunk
    # arithmetic overflowed: a kernel panic until 2026-12-07), are outside
    # it.  A prefetch there is EINVAL, a remote access a NAK.
    top, kern = (1 << 64) - 4096, 0xFFFF_8880_0000_0000
    for advice, at, what in ((e._IBV_ADVISE_MR_ADVICE_PREFETCH, top, "PREFETCH of the last page before 2^64"),
                             (e._IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT, kern, "PREFETCH_NO_FAULT of a kernel address")):
        try:
            d1.pd.advise_mr(advice, e._IBV_ADVISE_MR_FLAG_FLUSH, [SGE(at, 8, imr.lkey)])
            got = "success"
        except PyverbsRDMAError as x:
            got = x.error_code
        check(got == errno.EINVAL, f"implicit on-demand region: {what} -> EINVAL", f"got {got}")
    p3 = Pair(d0, d1)
    p3.post(e.IBV_WR_RDMA_WRITE, SGE(src.buf, 8, src.lkey), imr.rkey, top)
    wcs = rclib.poll(p3.cq0, 1, time.monotonic() + TMO)
    check(len(wcs) == 1 and wcs[0].status == e.IBV_WC_REM_ACCESS_ERR,
          "WRITE through the implicit region's key to the last page before 2^64: REM_ACCESS_ERR",
          f"{[wc_str(w) for w in wcs]}")
    err = xfer(p, e.IBV_WR_RDMA_WRITE, src, 4096, imr.rkey, m2)
    check(err is None and peek(m2, 4096) == src.read(4096, 0), "and the implicit region still works", err or "")

    # --- an implicit region keeps at most 8,192 children (one per 2 MiB
    # chunk with a page mapped): one more is ENOMEM while all of them hold
    # pages; once the process unmapped those, they are dropped instead.
    chunk, nch = 2 * MiB, 8192
    span = (nch + 2) * chunk
    big = mmap(span, flags=MAP_NORESERVE)
    base = (big + chunk - 1) // chunk * chunk
    imr2 = MR(d1.pd, 0, ODP, implicit=True)
    t0 = time.monotonic()
    for i in range(0, nch, 32):
        d1.pd.advise_mr(e._IBV_ADVISE_MR_ADVICE_PREFETCH, e._IBV_ADVISE_MR_FLAG_FLUSH,
                        [SGE(base + k * chunk, 8, imr2.lkey) for k in range(i, min(i + 32, nch))])
    print(f"# {nch} chunks prefetched in {time.monotonic() - t0:.1f} s")
    try:
        d1.pd.advise_mr(e._IBV_ADVISE_MR_ADVICE_PREFETCH, e._IBV_ADVISE_MR_FLAG_FLUSH,
                        [SGE(base + nch * chunk, 8, imr2.lkey)])
        got = "success"
    except PyverbsRDMAError as x:
        got = x.error_code
    check(got == errno.ENOMEM, f"implicit region: {nch} chunks with pages, a prefetch of one more -> ENOMEM",
          f"got {got}")
    munmap(big, span)
    m3 = mmap(MiB)
    part = os.urandom(MiB)
    src.write(part, MiB, 0)
    err = xfer(p, e.IBV_WR_RDMA_WRITE, src, MiB, imr2.rkey, m3)
    check(err is None and peek(m3, MiB) == part,
          "after the process unmapped them, a WRITE needing a new child lands (the unused ones dropped)", err or "")
    imr2.close()
    taplib.finish()


if __name__ == "__main__":
    main()
