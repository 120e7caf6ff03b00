#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Memory windows (TAP subtests).

Usage: mw_verbs.py DEV0 GID0 DEV1 GID1

DEV1 owns a region registered with IBV_ACCESS_MW_BIND (and no remote
access of its own) and binds windows to parts of it through its QP; DEV0's
QP reaches the memory through the window keys only.  Every transfer is
byte-checked (inside the window, and untouched around it); every
completion's status/opcode/wr_id is checked.  After each error that moves a
QP to ERR, a fresh QP pair is made and must transfer fine.

  - device caps: IBV_DEVICE_MEM_WINDOW, _TYPE_2B, max_mw; type 3 -> EINVAL
  - type 1 (ibv_bind_mw): new key = old key + 1 in the key byte, WRITE and
    READ through it, outside the window / without the access ->
    REM_ACCESS_ERR, a zero-length bind unbinds (old key refused)
  - bind errors -> IBV_WC_MW_BIND_ERR and the QP in ERR: region without
    MW_BIND access, remote write on a region without local write, range
    outside the region, type-2 window bound twice, type-2 zero-length bind
    (its region then deregisters)
  - type 2 (IBV_WR_BIND_MW): the caller's key works, the allocation key
    does not; another QP cannot use it (type 2B); LOCAL_INV -> access
    refused, LOCAL_INV again -> LOC_PROT_ERR; SEND_WITH_INV -> the receive
    reports the key (IBV_WC_WITH_INV) and access is refused, SEND_WITH_INV
    of an invalid key -> REM_ACCESS_ERR; LOCAL_INV of a type-1 window ->
    LOC_PROT_ERR
  - ibv_dereg_mr of a region with a bound window -> EBUSY, fine after
    the window is invalidated; ibv_dealloc_mw of a bound window -> the key
    is refused and the region can go
  - qp_ex: ibv_wr_bind_mw, ibv_wr_local_inv
  - atomics through zero-based type-2 windows: a window based at an
    unaligned address -> REM_INV_REQ_ERR (the target must be aligned)
"""
import errno
import os
import sys
import time

import pyverbs.enums as e
from pyverbs.mr import MR, MW, MWBind, MWBindInfo
from pyverbs.qp import QPCap, QPEx, QPInitAttrEx
from pyverbs.wr import SGE, RecvWR, SendWR

import rclib
from rclib import Dev, status_str, wc_str
from taplib import check, errno_of, finish

DEADLINE = 20 * int(os.environ.get("RROCE_TIMEOUT_SCALE", "1"))
SIZE = 1 << 16
MRW = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_MW_BIND
RW = e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ


class Pair:
    """A connected RC QP pair: qp0 on DEV0 (accesses), qp1 on DEV1 (owns
    the memory, binds).  `ex` makes qp1 an ibv_qp_ex with binds."""

    def __init__(self, d0, d1, ex=False):
        self.d0, self.d1 = d0, d1
        self.cq0, self.cq1 = d0.cq(64), d1.cq(64)
        self.qp0 = d0.qp(self.cq0, self.cq0)
        if ex:
            ops = (e.IBV_QP_EX_WITH_BIND_MW | e.IBV_QP_EX_WITH_LOCAL_INV | e.IBV_QP_EX_WITH_SEND |
                   e.IBV_QP_EX_WITH_SEND_WITH_INV)
            cap = QPCap(max_send_wr=16, max_recv_wr=16, max_send_sge=1, max_recv_sge=1)
            attr = QPInitAttrEx(qp_type=e.IBV_QPT_RC, scq=self.cq1, rcq=self.cq1, cap=cap, pd=d1.pd,
                                send_ops_flags=ops,
                                comp_mask=e.IBV_QP_INIT_ATTR_PD | e.IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)
            self.qp1 = QPEx(d1.ctx, attr)
        else:
            self.qp1 = d1.qp(self.cq1, self.cq1)
        rclib.connect(d0, self.qp0, 0x100, d1, self.qp1, 0x200, d0.active_mtu(), timeout=12, retry_cnt=2)
        self.buf0 = d0.mr(SIZE)

    def wcs(self, cq, n=1):
        got = rclib.poll(cq, n, time.monotonic() + DEADLINE)
        return got

    def one(self, cq, wr_id, status, opcode=None, desc=""):
        got = self.wcs(cq)
        ok = len(got) == 1 and got[0].wr_id == wr_id and got[0].status == status
        if ok and opcode is not None and status == e.IBV_WC_SUCCESS:
            ok = got[0].opcode == opcode
        check(ok, desc, "; ".join(wc_str(w) for w in got) or "no completion")
        return got[0] if got else None

    def rdma(self, opcode, rkey, raddr, off, n, wr_id=1):
        """RDMA WRITE (from buf0[off:off+n]) or READ (into it) through rkey;
        returns the completion status (or None)."""
        wr = SendWR(wr_id=wr_id, opcode=opcode, num_sge=1, sg=[SGE(self.buf0.buf + off, n, self.buf0.lkey)],
                    send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_rdma(rkey, raddr)
        self.qp0.post_send(wr)
        got = self.wcs(self.cq0)
        return got[0].status if got and got[0].wr_id == wr_id else None

    def bind2(self, mw, mr, addr, length, access, wr_id=0x77):
        """Type-2 bind posted on qp1; returns (new key, completion)."""
        wr = SendWR(wr_id=wr_id, opcode=e.IBV_WR_BIND_MW, send_flags=e.IBV_SEND_SIGNALED)
        wr.set_bind_wr(mw, MWBindInfo(mr, addr, length, access))
        self.qp1.post_send(wr)
        got = self.wcs(self.cq1)
        return wr.rkey, (got[0] if got else None)

    def local_inv(self, rkey, wr_id=0x88):
        wr = SendWR(wr_id=wr_id, opcode=e.IBV_WR_LOCAL_INV, send_flags=e.IBV_SEND_SIGNALED)
        wr.imm_data = rkey
        self.qp1.post_send(wr)
        got = self.wcs(self.cq1)
        return got[0] if got else None


def good_transfer(d0, d1, mr1, desc):
    """A fresh pair moves 4 KiB into mr1 through a fresh type-1 window."""
    p = Pair(d0, d1)
    mw = MW(d1.pd, e.IBV_MW_TYPE_1)
    p.qp1.bind_mw(mw, MWBind(MWBindInfo(mr1, mr1.buf, 4096, RW), e.IBV_SEND_SIGNALED))
    b = p.wcs(p.cq1)
    data = os.urandom(4096)
    p.buf0.write(data, 4096)
    st = p.rdma(e.IBV_WR_RDMA_WRITE, mw.rkey, mr1.buf, 0, 4096)
    check(len(b) == 1 and b[0].status == e.IBV_WC_SUCCESS and st == e.IBV_WC_SUCCESS
          and mr1.read(4096, 0) == data, f"{desc}: a fresh QP pair binds and writes 4 KiB fine",
          f"bind {[wc_str(w) for w in b]} write {status_str(st) if st is not None else None}")
    mw.close()
    return p


def inv_key(wc):
    """The invalidated rkey of a receive completion (host order)."""
    v = getattr(wc, "invalidated_rkey", None)
    return wc.imm_data if v is None else v


def expect_bind_err(p, wc, desc):
    ok = wc is not None and wc.status == e.IBV_WC_MW_BIND_ERR
    check(ok, f"{desc} -> IBV_WC_MW_BIND_ERR", wc_str(wc) if wc else "no completion")
    st = rclib.qp_state(p.qp1)
    check(st == e.IBV_QPS_ERR, f"{desc}: the QP is in ERR", rclib.state_str(st))


def main():
    dev0, g0, dev1, g1 = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    d0, d1 = Dev(dev0, g0), Dev(dev1, g1)

    a = d1.ctx.query_device()
    need = e.IBV_DEVICE_MEM_WINDOW | e.IBV_DEVICE_MEM_WINDOW_TYPE_2B
    check(a.device_cap_flags & need == need and a.max_mw > 0,
          "device caps: IBV_DEVICE_MEM_WINDOW, IBV_DEVICE_MEM_WINDOW_TYPE_2B, max_mw > 0",
          f"flags {a.device_cap_flags:#x} max_mw {a.max_mw}")
    r = errno_of(lambda: MW(d1.pd, 3))
    check(r == errno.EINVAL, "ibv_alloc_mw of type 3 -> EINVAL", f"errno {r}")

    mr1 = MR(d1.pd, SIZE, MRW)
    mr1.write(bytes(SIZE), SIZE)

    # --- type 1 -----------------------------------------------------------
    p = Pair(d0, d1)
    mw1 = MW(d1.pd, e.IBV_MW_TYPE_1)
    k0 = mw1.rkey
    p.qp1.bind_mw(mw1, MWBind(MWBindInfo(mr1, mr1.buf + 4096, 8192, RW), e.IBV_SEND_SIGNALED))
    p.one(p.cq1, 0, e.IBV_WC_SUCCESS, e.IBV_WC_BIND_MW, "type 1: ibv_bind_mw completes with IBV_WC_BIND_MW")
    check(mw1.rkey >> 8 == k0 >> 8 and mw1.rkey & 0xff == (k0 + 1) & 0xff,
          "type 1: the window's new rkey keeps the index and increments the key byte",
          f"{k0:#x} -> {mw1.rkey:#x}")
    data = os.urandom(8192)
    p.buf0.write(data + bytes(SIZE - 8192), SIZE)
    st = p.rdma(e.IBV_WR_RDMA_WRITE, mw1.rkey, mr1.buf + 4096, 0, 8192)
    whole = mr1.read(SIZE, 0)
    check(st == e.IBV_WC_SUCCESS and whole[4096:12288] == data and whole[:4096] == bytes(4096)
          and whole[12288:] == bytes(SIZE - 12288),
          "type 1: RDMA WRITE of 8 KiB through the window lands byte for byte, nothing around it",
          status_str(st) if st is not None else "no completion")
    st = p.rdma(e.IBV_WR_RDMA_READ, mw1.rkey, mr1.buf + 4096 + 100, 16384, 5000, wr_id=2)
    check(st == e.IBV_WC_SUCCESS and p.buf0.read(5000, 16384) == data[100:5100],
          "type 1: RDMA READ of 5000 bytes through the window returns the bytes",
          status_str(st) if st is not None else "no completion")
    st = p.rdma(e.IBV_WR_RDMA_WRITE, mw1.rkey, mr1.buf + 4096 + 8192 - 8, 0, 16, wr_id=3)
    check(st == e.IBV_WC_REM_ACCESS_ERR and mr1.read(SIZE, 0) == whole,
          "type 1: WRITE crossing the window's end -> REM_ACCESS_ERR, memory unchanged",
          status_str(st) if st is not None else "no completion")
    good_transfer(d0, d1, mr1, "after the range error")

    # A window without remote READ; a region key without remote access.
    p = Pair(d0, d1)
    p.qp1.bind_mw(mw1, MWBind(MWBindInfo(mr1, mr1.buf, 4096, e.IBV_ACCESS_REMOTE_WRITE), e.IBV_SEND_SIGNALED))
    p.one(p.cq1, 0, e.IBV_WC_SUCCESS, e.IBV_WC_BIND_MW, "type 1: rebinding a bound type-1 window succeeds")
    st = p.rdma(e.IBV_WR_RDMA_READ, mw1.rkey, mr1.buf, 0, 64)
    check(st == e.IBV_WC_REM_ACCESS_ERR, "type 1: READ through a write-only window -> REM_ACCESS_ERR",
          status_str(st) if st is not None else "no completion")
    p = Pair(d0, d1)
    st = p.rdma(e.IBV_WR_RDMA_WRITE, mr1.rkey, mr1.buf, 0, 64)
    check(st == e.IBV_WC_REM_ACCESS_ERR,
          "the region's own rkey (MW_BIND, no remote access) -> REM_ACCESS_ERR",
          status_str(st) if st is not None else "no completion")

    # dereg with a bound window, zero-length unbind.
    r = errno_of(mr1.close)
    check(r == errno.EBUSY, "ibv_dereg_mr of a region with a bound window -> EBUSY", f"errno {r}")
    p = Pair(d0, d1)
    old = mw1.rkey
    p.qp1.bind_mw(mw1, MWBind(MWBindInfo(mr1, mr1.buf, 0, 0), e.IBV_SEND_SIGNALED))
    p.one(p.cq1, 0, e.IBV_WC_SUCCESS, e.IBV_WC_BIND_MW, "type 1: zero-length bind (unbind) completes")
    st = p.rdma(e.IBV_WR_RDMA_WRITE, old, mr1.buf, 0, 64)
    check(st == e.IBV_WC_REM_ACCESS_ERR, "type 1: the key before the unbind -> REM_ACCESS_ERR",
          status_str(st) if st is not None else "no completion")
    p = Pair(d0, d1)
    st = p.rdma(e.IBV_WR_RDMA_WRITE, mw1.rkey, mr1.buf, 0, 64)
    check(st == e.IBV_WC_REM_ACCESS_ERR, "type 1: the unbound window's new key -> REM_ACCESS_ERR",
          status_str(st) if st is not None else "no completion")
    mw1.close()
    r = errno_of(mr1.close)
    check(r == 0, "ibv_dereg_mr once the window is unbound and deallocated succeeds", f"errno {r}")
    mr1 = MR(d1.pd, SIZE, MRW)
    mr1.write(bytes(SIZE), SIZE)

    # --- bind errors -------------------------------------------------------
    plain = MR(d1.pd, SIZE, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE)
    p = Pair(d0, d1)
    mw = MW(d1.pd, e.IBV_MW_TYPE_1)
    p.qp1.bind_mw(mw, MWBind(MWBindInfo(plain, plain.buf, 4096, RW), e.IBV_SEND_SIGNALED))
    expect_bind_err(p, (p.wcs(p.cq1) or [None])[0], "bind to an MR without MW_BIND access")
    good_transfer(d0, d1, mr1, "after the bind to an MR without MW access")
    ro = MR(d1.pd, SIZE, e.IBV_ACCESS_MW_BIND | e.IBV_ACCESS_REMOTE_READ)
    p = Pair(d0, d1)
    p.qp1.bind_mw(mw, MWBind(MWBindInfo(ro, ro.buf, 4096, e.IBV_ACCESS_REMOTE_WRITE), e.IBV_SEND_SIGNALED))
    expect_bind_err(p, (p.wcs(p.cq1) or [None])[0], "remote-write window on a region without local write")
    p = Pair(d0, d1)
    p.qp1.bind_mw(mw, MWBind(MWBindInfo(mr1, mr1.buf + SIZE - 4096, 8192, RW), e.IBV_SEND_SIGNALED))
    expect_bind_err(p, (p.wcs(p.cq1) or [None])[0], "window reaching past the region's end")
    good_transfer(d0, d1, mr1, "after the bind errors")
    mw.close()

    # --- type 2 -------------------------------------------------------------
    p = Pair(d0, d1)
    mw2 = MW(d1.pd, e.IBV_MW_TYPE_2)
    alloc_key = mw2.rkey
    key, wc = p.bind2(mw2, mr1, mr1.buf + 8192, 4096, RW)
    check(wc is not None and wc.status == e.IBV_WC_SUCCESS and wc.opcode == e.IBV_WC_BIND_MW
          and wc.wr_id == 0x77 and key != alloc_key and key >> 8 == alloc_key >> 8,
          "type 2: IBV_WR_BIND_MW completes with IBV_WC_BIND_MW under the caller's key",
          (wc_str(wc) if wc else "no completion") + f" key {alloc_key:#x}->{key:#x}")
    data = os.urandom(4096)
    p.buf0.write(data, 4096)
    st = p.rdma(e.IBV_WR_RDMA_WRITE, key, mr1.buf + 8192, 0, 4096)
    check(st == e.IBV_WC_SUCCESS and mr1.read(4096, 8192) == data,
          "type 2: RDMA WRITE through the window lands byte for byte",
          status_str(st) if st is not None else "no completion")
    q = Pair(d0, d1)
    st = q.rdma(e.IBV_WR_RDMA_WRITE, key, mr1.buf + 8192, 0, 64)
    check(st == e.IBV_WC_REM_ACCESS_ERR, "type 2B: another QP using the window's key -> REM_ACCESS_ERR",
          status_str(st) if st is not None else "no completion")
    r = errno_of(mr1.close)
    check(r == errno.EBUSY, "type 2: ibv_dereg_mr of the region with the bound window -> EBUSY", f"errno {r}")
    wc = p.local_inv(key)
    check(wc is not None and wc.status == e.IBV_WC_SUCCESS and wc.opcode == e.IBV_WC_LOCAL_INV,
          "type 2: LOCAL_INV of the window's key completes (IBV_WC_LOCAL_INV)", wc_str(wc) if wc else "none")
    st = p.rdma(e.IBV_WR_RDMA_WRITE, key, mr1.buf + 8192, 0, 64)
    check(st == e.IBV_WC_REM_ACCESS_ERR, "type 2: access after LOCAL_INV -> REM_ACCESS_ERR",
          status_str(st) if st is not None else "no completion")
    p = Pair(d0, d1)  # the access error moved both QPs to ERR
    wc = p.local_inv(key, wr_id=0x89)
    check(wc is not None and wc.status == e.IBV_WC_LOC_PROT_ERR and wc.wr_id == 0x89,
          "type 2: LOCAL_INV of the now invalid key -> LOC_PROT_ERR", wc_str(wc) if wc else "none")
    st = rclib.qp_state(p.qp1)
    check(st == e.IBV_QPS_ERR, "type 2: the failed LOCAL_INV moved the QP to ERR", rclib.state_str(st))
    good_transfer(d0, d1, mr1, "after LOCAL_INV")

    # SEND_WITH_INV from the peer.
    p = Pair(d0, d1)
    key, wc = p.bind2(mw2, mr1, mr1.buf, 4096, RW)
    check(wc is not None and wc.status == e.IBV_WC_SUCCESS, "type 2: rebinding after invalidation succeeds",
          wc_str(wc) if wc else "none")
    p.qp1.post_recv(RecvWR(wr_id=0x55, num_sge=1, sg=[SGE(mr1.buf + 32768, 256, mr1.lkey)]))
    msg = os.urandom(100)
    p.buf0.write(msg, 100)
    wr = SendWR(wr_id=0x66, opcode=e.IBV_WR_SEND_WITH_INV, num_sge=1, sg=[SGE(p.buf0.buf, 100, p.buf0.lkey)],
                send_flags=e.IBV_SEND_SIGNALED)
    wr.imm_data = key
    p.qp0.post_send(wr)
    p.one(p.cq0, 0x66, e.IBV_WC_SUCCESS, e.IBV_WC_SEND, "SEND_WITH_INV of the window's key completes")
    got = p.wcs(p.cq1)
    ok = (len(got) == 1 and got[0].status == e.IBV_WC_SUCCESS and got[0].wr_id == 0x55
          and got[0].wc_flags & e.IBV_WC_WITH_INV and inv_key(got[0]) == key and got[0].byte_len == 100
          and mr1.read(100, 32768) == msg)
    check(ok, "the receive has the data, IBV_WC_WITH_INV and the invalidated key",
          "; ".join(wc_str(w) for w in got) or "none")
    st = p.rdma(e.IBV_WR_RDMA_WRITE, key, mr1.buf, 0, 64, wr_id=9)
    check(st == e.IBV_WC_REM_ACCESS_ERR, "type 2: access after SEND_WITH_INV -> REM_ACCESS_ERR",
          status_str(st) if st is not None else "no completion")
    p = Pair(d0, d1)
    p.qp1.post_recv(RecvWR(wr_id=0x56, num_sge=1, sg=[SGE(mr1.buf + 32768, 256, mr1.lkey)]))
    wr = SendWR(wr_id=0x67, opcode=e.IBV_WR_SEND_WITH_INV, num_sge=1, sg=[SGE(p.buf0.buf, 100, p.buf0.lkey)],
                send_flags=e.IBV_SEND_SIGNALED)
    wr.imm_data = key
    p.qp0.post_send(wr)
    got = p.wcs(p.cq0)
    check(len(got) == 1 and got[0].status == e.IBV_WC_REM_ACCESS_ERR,
          "SEND_WITH_INV of an invalid window key -> REM_ACCESS_ERR", "; ".join(wc_str(w) for w in got))

    # Type 2 bound twice; LOCAL_INV of a type-1 window.
    p = Pair(d0, d1)
    key, wc = p.bind2(mw2, mr1, mr1.buf, 4096, RW)
    check(wc is not None and wc.status == e.IBV_WC_SUCCESS, "type 2: bind", wc_str(wc) if wc else "none")
    _, wc = p.bind2(mw2, mr1, mr1.buf, 4096, RW, wr_id=0x78)
    expect_bind_err(p, wc, "type 2: binding a bound window again")
    # A zero-length bind of a type-2 window is an error (o10-37.2.40), not
    # an empty binding holding the region (its dereg would be EBUSY).
    p = Pair(d0, d1)
    mrz = MR(d1.pd, 4096, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_MW_BIND)
    mwz = MW(d1.pd, e.IBV_MW_TYPE_2)
    _, wc = p.bind2(mwz, mrz, mrz.buf, 0, RW, wr_id=0x79)
    expect_bind_err(p, wc, "type 2: a zero-length bind")
    rc = errno_of(mrz.close)
    check(rc == 0, "... and the region deregisters (no window holds it)", f"errno {rc}")
    mw1 = MW(d1.pd, e.IBV_MW_TYPE_1)
    p = Pair(d0, d1)
    p.qp1.bind_mw(mw1, MWBind(MWBindInfo(mr1, mr1.buf, 4096, RW), e.IBV_SEND_SIGNALED))
    p.wcs(p.cq1)
    wc = p.local_inv(mw1.rkey)
    check(wc is not None and wc.status == e.IBV_WC_LOC_PROT_ERR,
          "LOCAL_INV of a type-1 window's key -> LOC_PROT_ERR", wc_str(wc) if wc else "none")
    mw1.close()

    # Dealloc with a binding.
    p = Pair(d0, d1)
    mw3 = MW(d1.pd, e.IBV_MW_TYPE_2)
    key3, wc = p.bind2(mw3, mr1, mr1.buf, 4096, RW)
    check(wc is not None and wc.status == e.IBV_WC_SUCCESS, "type 2: bind a second window",
          wc_str(wc) if wc else "none")
    r = errno_of(mw3.close)
    check(r == 0, "ibv_dealloc_mw of a bound window succeeds", f"errno {r}")
    st = p.rdma(e.IBV_WR_RDMA_WRITE, key3, mr1.buf, 0, 64)
    check(st == e.IBV_WC_REM_ACCESS_ERR, "the deallocated window's key -> REM_ACCESS_ERR",
          status_str(st) if st is not None else "no completion")
    mw2.close()
    r = errno_of(mr1.close)
    check(r == 0, "ibv_dereg_mr after its windows were deallocated succeeds", f"errno {r}")
    mr1 = MR(d1.pd, SIZE, MRW)
    mr1.write(bytes(SIZE), SIZE)

    # --- qp_ex ----------------------------------------------------------------
    p = Pair(d0, d1, ex=True)
    mw4 = MW(d1.pd, e.IBV_MW_TYPE_2)
    key4 = (mw4.rkey & ~0xff) | ((mw4.rkey + 7) & 0xff)
    p.qp1.wr_start()
    p.qp1.wr_id = 0x91
    p.qp1.wr_flags = e.IBV_SEND_SIGNALED
    p.qp1.wr_bind_mw(mw4, key4, MWBindInfo(mr1, mr1.buf + 4096, 4096, RW))
    p.qp1.wr_complete()
    p.one(p.cq1, 0x91, e.IBV_WC_SUCCESS, e.IBV_WC_BIND_MW, "qp_ex: ibv_wr_bind_mw completes")
    data = os.urandom(4096)
    p.buf0.write(data, 4096)
    st = p.rdma(e.IBV_WR_RDMA_WRITE, key4, mr1.buf + 4096, 0, 4096)
    check(st == e.IBV_WC_SUCCESS and mr1.read(4096, 4096) == data,
          "qp_ex: RDMA WRITE through the window lands byte for byte",
          status_str(st) if st is not None else "no completion")
    p.qp1.wr_start()
    p.qp1.wr_id = 0x92
    p.qp1.wr_flags = e.IBV_SEND_SIGNALED
    p.qp1.wr_local_inv(key4)
    p.qp1.wr_complete()
    p.one(p.cq1, 0x92, e.IBV_WC_SUCCESS, e.IBV_WC_LOCAL_INV, "qp_ex: ibv_wr_local_inv completes")
    st = p.rdma(e.IBV_WR_RDMA_WRITE, key4, mr1.buf + 4096, 0, 64)
    check(st == e.IBV_WC_REM_ACCESS_ERR, "qp_ex: access after ibv_wr_local_inv -> REM_ACCESS_ERR",
          status_str(st) if st is not None else "no completion")
    mw4.close()
    zero_based_atomics(d0, d1, mr1)
    good_transfer(d0, d1, mr1, "at the end")
    finish()


def zero_based_atomics(d0, d1, mr1):
    """Atomics through zero-based type-2 windows: the address that must be
    8-byte aligned is the target in the region (the window's base plus the
    requested offset), not the offset alone.  A window based 4 bytes off
    alignment: FETCH_AND_ADD at window offset 0 -> REM_INV_REQ_ERR, memory
    unchanged; a window based at an aligned address: it works."""
    acc = RW | e.IBV_ACCESS_REMOTE_ATOMIC | e.IBV_ACCESS_ZERO_BASED
    for base, ok in ((4 + 256, False), (8 + 256, True)):
        p = Pair(d0, d1)
        mw = MW(d1.pd, e.IBV_MW_TYPE_2)
        mr1.write(bytes(range(32)), 32, 256)
        before = mr1.read(32, 256)
        key, wc = p.bind2(mw, mr1, mr1.buf + base, 64, acc)
        check(wc is not None and wc.status == e.IBV_WC_SUCCESS,
              f"zero-based type-2 window at region offset {base}: bind", wc_str(wc) if wc else "none")
        wr = SendWR(wr_id=5, opcode=e.IBV_WR_ATOMIC_FETCH_AND_ADD, num_sge=1,
                    sg=[SGE(p.buf0.buf, 8, p.buf0.lkey)], send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_atomic(key, 0, 1, 0)
        p.qp0.post_send(wr)
        got = p.wcs(p.cq0)
        st = got[0].status if got else None
        after = mr1.read(32, 256)
        if ok:
            word = int.from_bytes(before[base - 256:base - 256 + 8], "little")
            want = before[:base - 256] + (word + 1).to_bytes(8, "little") + before[base - 256 + 8:]
            check(st == e.IBV_WC_SUCCESS and after == want,
                  "zero-based window at an aligned base: FETCH_AND_ADD at window offset 0 adds at the base",
                  status_str(st) if st is not None else "no completion")
        else:
            check(st == e.IBV_WC_REM_INV_REQ_ERR and after == before,
                  "zero-based window 4 bytes off alignment: FETCH_AND_ADD at window offset 0 -> "
                  "REM_INV_REQ_ERR, memory unchanged",
                  (status_str(st) if st is not None else "no completion") + f", memory {after.hex()}")
        wc = p.local_inv(key, wr_id=0x8a) if ok else None
        if ok:
            check(wc is not None and wc.status == e.IBV_WC_SUCCESS, "  ... the window is invalidated",
                  wc_str(wc) if wc else "none")
        mw.close()


if __name__ == "__main__":
    main()
