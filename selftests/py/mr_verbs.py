#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Memory-region verbs through libibverbs and the rroce provider.

Usage: mr_verbs.py DEVICE.  One "ok/not ok" line per check.
"""
import sys

import pyverbs.enums as e
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from taplib import check, errno_of, finish, vm_pin_kb


ctx = Context(name=sys.argv[1])
pd = PD(ctx)
LW = e.IBV_ACCESS_LOCAL_WRITE
ALL = LW | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ | e.IBV_ACCESS_REMOTE_ATOMIC

mr = MR(pd, 1 << 20, ALL)
check(mr.lkey == mr.rkey and mr.lkey != 0, "1 MiB MR with remote access has lkey == rkey != 0", f"{mr.lkey:#x}/{mr.rkey:#x}")
mr.write(b"rroce" * 100, 500)
check(mr.read(500, 0) == b"rroce" * 100, "the registered buffer is still ordinary memory to its owner")
mr.close()

check(errno_of(lambda: MR(pd, 4096, e.IBV_ACCESS_REMOTE_WRITE)) == 22,
      "REMOTE_WRITE without LOCAL_WRITE -> EINVAL")
check(errno_of(lambda: MR(pd, 4096, e.IBV_ACCESS_ON_DEMAND | LW)) == 0,
      "on-demand paging: registered (odp.sh uses it)")
check(errno_of(lambda: MR(pd, 4096, e.IBV_ACCESS_HUGETLB | LW)) == 95,
      "HUGETLB without ON_DEMAND -> EOPNOTSUPP")
check(errno_of(lambda: MR(pd, 1 << 37, e.IBV_ACCESS_ON_DEMAND | LW, address=1 << 40)) == 22,
      "an explicit on-demand region over 128 GiB -> EINVAL (implicit regions cover that)")
check(errno_of(lambda: MR(pd, 0, LW)) == 22, "zero-length MR -> EINVAL")

mrs = [MR(pd, 4096 * (1 + i % 7), LW | e.IBV_ACCESS_REMOTE_READ) for i in range(500)]
keys = {m.lkey for m in mrs}
check(len(keys) == 500, "500 MRs get 500 distinct keys", f"{len(keys)} distinct")
first = mrs[0].lkey
for m in mrs:
    m.close()
again = MR(pd, 4096, LW)
check(again.lkey != first, "a new MR does not reuse a just-freed key", f"{again.lkey:#x} == {first:#x}")
again.close()

# Keys must not be guessable from one's own (a peer holding one rkey could
# otherwise try the neighbours): the key byte is random, so among 200
# registrations in a row the low bytes do not step by a constant.
seq = [MR(pd, 4096, LW | e.IBV_ACCESS_REMOTE_READ) for _ in range(200)]
low = [m.rkey & 0xFF for m in seq]
steps = {(b - a) & 0xFF for a, b in zip(low, low[1:])}
check(len(steps) > 50 and len(set(low)) > 100, "the key bytes of 200 consecutive MRs look random (no constant step)",
      f"{len(steps)} distinct steps, {len(set(low))} distinct bytes: {low[:12]}")
idx = [m.rkey >> 8 for m in seq]
for m in seq:
    m.close()
# Freed key indexes are reused as late as possible: the next registration
# does not take the index just freed.
nxt = MR(pd, 4096, LW)
check(nxt.lkey >> 8 not in idx, "a new MR takes a fresh key index, not one of the 200 just freed",
      f"index {nxt.lkey >> 8:#x}")
nxt.close()

# The same for QP numbers: a destroyed QP's number is not handed out again
# right away (a late completion or packet must never name a new QP).
from pyverbs.cq import CQ
from pyverbs.qp import QP, QPCap, QPInitAttr
cq = CQ(ctx, 8)
cap = QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1)
qpns = []
for _ in range(20):
    q = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
    qpns.append(q.qp_num)
    q.close()
check(len(set(qpns)) == 20, "20 QPs created and destroyed in turn get 20 different QP numbers",
      f"{sorted(set(qpns))[:8]}...")
cq.close()





base = vm_pin_kb()
pinned = [MR(pd, 65536, LW) for _ in range(16)]
check(vm_pin_kb() - base >= 1024, "16 x 64 KiB MRs pin (at least) 1 MiB (VmPin)", f"{base} -> {vm_pin_kb()} kB")
for m in pinned:
    m.close()
check(vm_pin_kb() == base, "deregistering unpins them", f"{vm_pin_kb()} kB, expected {base}")
# Leave MRs registered: process exit must unpin and free them (the shell
# wrapper checks dmesg and kmemleak).
leak = [MR(pd, 65536, LW) for _ in range(16)]
finish()
