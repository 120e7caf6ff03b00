#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""ibv_rereg_mr through the rroce provider, checked by traffic.

Usage: mr_rereg.py DEV0 GID0 DEV1 GID1.  An RC pair DEV0 -> DEV1; the
target MR on DEV1 is re-registered in each way ibv_rereg_mr allows and
the peer's RDMA WRITE/READ and SENDs show what changed: keys stay, access
changes take effect, a PD change makes the MR unusable by the old PD's
QP, a translation change moves the data to the new buffer.  One
"ok/not ok" line per check.
"""
import ctypes
import mmap
import sys
import time

import pyverbs.enums as e
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.wr import RecvWR, SendWR, SGE

import rclib
from rclib import Dev, connect, poll, status_str
from taplib import check, errno_of, finish, vm_pin_kb

LW = e.IBV_ACCESS_LOCAL_WRITE
RW = e.IBV_ACCESS_REMOTE_WRITE
RR = e.IBV_ACCESS_REMOTE_READ
SIZE = 64 * 1024

d0 = Dev(sys.argv[1], int(sys.argv[2]))
d1 = Dev(sys.argv[3], int(sys.argv[4]))
mtu = min(d0.active_mtu(), d1.active_mtu())


class Pair:
    """RC QP pair d0 -> d1 with its CQs."""

    def __init__(self):
        self.cq0, self.cq1 = d0.cq(64), d1.cq(64)
        self.qp0 = d0.qp(self.cq0, self.cq0)
        self.qp1 = d1.qp(self.cq1, self.cq1)
        connect(d0, self.qp0, 100, d1, self.qp1, 200, mtu, timeout=12, retry_cnt=2, rnr_retry=2)


def post_rdma(p, opcode, local, off, length, rkey, raddr, wr_id=1):
    wr = SendWR(wr_id=wr_id, opcode=opcode, num_sge=1, sg=[SGE(local.buf + off, length, local.lkey)],
                send_flags=e.IBV_SEND_SIGNALED)
    wr.set_wr_rdma(rkey, raddr)
    p.qp0.post_send(wr)
    wcs = poll(p.cq0, 1, time.monotonic() + 20)
    return wcs[0].status if wcs else None


def pattern(seed, n):
    return bytes((seed * 31 + i * 7) & 0xFF for i in range(n))


src = d0.mr(SIZE)
tgt = MR(d1.pd, SIZE, LW | RW | RR)
key0 = (tgt.lkey, tgt.rkey)

# 1. access: drop REMOTE_WRITE -> the peer's WRITE gets REM_ACCESS_ERR;
# the keys do not change (applications keep using the exchanged rkey).
p = Pair()
data = pattern(1, 8192)
src.write(data, len(data), 0)
st = post_rdma(p, e.IBV_WR_RDMA_WRITE, src, 0, 8192, tgt.rkey, tgt.buf)
check(st == e.IBV_WC_SUCCESS and tgt.read(8192, 0) == data, "WRITE before rereg lands", status_str(st))
rc = errno_of(lambda: tgt.rereg(e.IBV_REREG_MR_CHANGE_ACCESS, None, 0, 0, LW | RR))
check(rc == 0, "rereg CHANGE_ACCESS to LOCAL_WRITE|REMOTE_READ", f"errno {rc}")
check((tgt.lkey, tgt.rkey) == key0, "keys unchanged by an access rereg", f"{key0} -> {(tgt.lkey, tgt.rkey)}")
src.write(pattern(2, 8192), 8192, 0)
st = post_rdma(p, e.IBV_WR_RDMA_WRITE, src, 0, 8192, tgt.rkey, tgt.buf)
check(st == e.IBV_WC_REM_ACCESS_ERR, "WRITE without REMOTE_WRITE now -> REM_ACCESS_ERR", status_str(st))
check(tgt.read(8192, 0) == data, "the refused WRITE changed nothing")
p = Pair()
st = post_rdma(p, e.IBV_WR_RDMA_READ, src, 0, 8192, tgt.rkey, tgt.buf)
check(st == e.IBV_WC_SUCCESS and src.read(8192, 0) == data, "READ (still allowed) returns the data",
      status_str(st))
rc = errno_of(lambda: tgt.rereg(e.IBV_REREG_MR_CHANGE_ACCESS, None, 0, 0, LW | RW | RR))
check(rc == 0, "rereg CHANGE_ACCESS back to REMOTE_WRITE", f"errno {rc}")
data = pattern(3, SIZE)
src.write(data, SIZE, 0)
st = post_rdma(p, e.IBV_WR_RDMA_WRITE, src, 0, SIZE, tgt.rkey, tgt.buf)
check(st == e.IBV_WC_SUCCESS and tgt.read(SIZE, 0) == data, "64 KiB WRITE allowed again, bytes verified",
      status_str(st))

# 2. bad requests fail and leave the MR as it was.
rc = errno_of(lambda: tgt.rereg(e.IBV_REREG_MR_CHANGE_ACCESS, None, 0, 0, RW))
check(rc == errno_of(lambda: MR(d1.pd, 4096, RW)) and rc != 0,
      "rereg to REMOTE_WRITE without LOCAL_WRITE fails like reg_mr", f"errno {rc}")
st = post_rdma(p, e.IBV_WR_RDMA_READ, src, 0, 4096, tgt.rkey, tgt.buf)
check(st == e.IBV_WC_SUCCESS and src.read(4096, 0) == data[:4096], "MR intact after the failed rereg",
      status_str(st))

# 3. PD: move the MR to another PD -> a QP of the old PD cannot use it
# (remote: REM_ACCESS_ERR); moving it back makes it usable again.
pd2 = PD(d1.ctx)
rc = errno_of(lambda: tgt.rereg(e.IBV_REREG_MR_CHANGE_PD, pd2, 0, 0, 0))
check(rc == 0, "rereg CHANGE_PD to a second PD", f"errno {rc}")
st = post_rdma(p, e.IBV_WR_RDMA_READ, src, 0, 4096, tgt.rkey, tgt.buf)
check(st == e.IBV_WC_REM_ACCESS_ERR, "READ through a QP of the old PD -> REM_ACCESS_ERR", status_str(st))
rc = errno_of(lambda: tgt.rereg(e.IBV_REREG_MR_CHANGE_PD, d1.pd, 0, 0, 0))
check(rc == 0, "rereg CHANGE_PD back", f"errno {rc}")
# To the PD it has: ib_uverbs drops the flag and asks the driver for no
# change, which succeeds (rxe, mlx5; EINVAL here until 2026-12-07).
keys = (tgt.lkey, tgt.rkey)
rc = errno_of(lambda: tgt.rereg(e.IBV_REREG_MR_CHANGE_PD, d1.pd, 0, 0, 0))
check(rc == 0 and (tgt.lkey, tgt.rkey) == keys, "rereg CHANGE_PD to the PD it has: success, keys kept",
      f"errno {rc}")
p = Pair()
st = post_rdma(p, e.IBV_WR_RDMA_READ, src, 0, SIZE, tgt.rkey, tgt.buf)
check(st == e.IBV_WC_SUCCESS and src.read(SIZE, 0) == data, "READ works again on a fresh pair", status_str(st))

# 4. translation: point the MR at a new buffer.  A WRITE to the new range
# lands there and the old buffer is untouched; the old range is refused.
buf = mmap.mmap(-1, SIZE)
addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
old_addr = tgt.buf
rc = errno_of(lambda: tgt.rereg(e.IBV_REREG_MR_CHANGE_TRANSLATION, None, addr, SIZE, 0))
check(rc == 0, "rereg CHANGE_TRANSLATION to a new 64 KiB buffer", f"errno {rc}")
check((tgt.lkey, tgt.rkey) == key0, "keys unchanged by a translation rereg")
data = pattern(4, SIZE)
src.write(data, SIZE, 0)
st = post_rdma(p, e.IBV_WR_RDMA_WRITE, src, 0, SIZE, tgt.rkey, addr)
check(st == e.IBV_WC_SUCCESS and bytes(buf[:SIZE]) == data, "WRITE to the new range lands in the new buffer",
      status_str(st))
if old_addr + SIZE <= addr or addr + SIZE <= old_addr:
    st = post_rdma(p, e.IBV_WR_RDMA_WRITE, src, 0, 64, tgt.rkey, old_addr)
    check(st == e.IBV_WC_REM_ACCESS_ERR, "WRITE to the old range -> REM_ACCESS_ERR", status_str(st))
    p = Pair()
# receive into the new buffer through the MR's lkey
rwr = RecvWR(wr_id=7, num_sge=1, sg=[SGE(addr, 4096, tgt.lkey)])
p.qp1.post_recv(rwr)
msg = pattern(5, 4096)
src.write(msg, 4096, 0)
swr = SendWR(wr_id=8, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(src.buf, 4096, src.lkey)],
             send_flags=e.IBV_SEND_SIGNALED)
p.qp0.post_send(swr)
s = poll(p.cq0, 1, time.monotonic() + 20)
r = poll(p.cq1, 1, time.monotonic() + 20)
check(len(s) == 1 and s[0].status == e.IBV_WC_SUCCESS and len(r) == 1 and r[0].status == e.IBV_WC_SUCCESS
      and r[0].byte_len == 4096 and bytes(buf[:4096]) == msg, "SEND received through the new translation",
      f"{[rclib.wc_str(w) for w in s + r]}")

# 5. pinning follows the MR: VmPin goes with the new range, and is back to
# the baseline after deregistration.


before = vm_pin_kb()
big = mmap.mmap(-1, 4 * SIZE)
big_addr = ctypes.addressof(ctypes.c_char.from_buffer(big))
rc = errno_of(lambda: tgt.rereg(e.IBV_REREG_MR_CHANGE_TRANSLATION, None, big_addr, 4 * SIZE, 0))
after = vm_pin_kb()
grow = 3 * SIZE // 1024
check(rc == 0 and after - before == grow, "a 256 KiB translation pins 256 KiB in place of 64 KiB (VmPin)",
      f"errno {rc}, VmPin {before} -> {after} kB, expected +{grow}")
tgt.close()
final = vm_pin_kb()
check(final == before - SIZE // 1024, "dereg after rereg unpins everything of the MR",
      f"VmPin {final} kB, expected {before - SIZE // 1024}")

# 6. a rereg without CHANGE_TRANSLATION keeps the pages registered (the
# IBA; mlx5 keeps its umem): the first page of the MR's buffer is replaced
# by a fresh mapping, the access rereg'd, and the peer's READ still finds
# the registered bytes.  Until 2026-12-07 every rereg pinned the range
# afresh, so the MR moved to the new page (and charged RLIMIT_MEMLOCK
# twice for the time of the call).
p = Pair()
buf6 = mmap.mmap(-1, SIZE)
addr6 = ctypes.addressof(ctypes.c_char.from_buffer(buf6))
mr6 = MR(d1.pd, SIZE, LW | RW | RR)
rc = errno_of(lambda: mr6.rereg(e.IBV_REREG_MR_CHANGE_TRANSLATION, None, addr6, SIZE, 0))
data6 = pattern(6, 4096)
buf6[:4096] = data6
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
MAP_FIXED = 0x10
got = libc.mmap(addr6, 4096, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | MAP_FIXED, -1, 0)
check(rc == 0 and got == addr6 and bytes(buf6[:4096]) == bytes(4096),
      "the MR's first page replaced by a fresh one (the process sees zeros)", f"errno {rc}, mmap {got}")
rc = errno_of(lambda: mr6.rereg(e.IBV_REREG_MR_CHANGE_ACCESS, None, 0, 0, LW | RW | RR))
check(rc == 0, "rereg CHANGE_ACCESS", f"errno {rc}")
src.write(bytes(4096), 4096, 0)
st = post_rdma(p, e.IBV_WR_RDMA_READ, src, 0, 4096, mr6.rkey, addr6)
check(st == e.IBV_WC_SUCCESS and src.read(4096, 0) == data6,
      "the peer's READ after the access rereg returns the registered page's bytes",
      f"{status_str(st)}, first bytes {src.read(8, 0).hex()} want {data6[:8].hex()}")
mr6.close()
del p
finish()
