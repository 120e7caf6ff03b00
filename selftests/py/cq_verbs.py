#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""CQ verbs through libibverbs and the rroce provider (TAP subtests).

Usage: cq_verbs.py DEVICE.  Prints one "ok/not ok" line per check; the
shell wrapper counts them.
"""
import sys

from pyverbs.cq import CQ, CompChannel
from pyverbs.device import Context
from taplib import check, errno_of, finish


dev = sys.argv[1]
ctx = Context(name=dev)
attr = ctx.query_device()

cq = CQ(ctx, 100)
check(cq.cqe >= 100 and cq.cqe & (cq.cqe - 1) == 0, "CQ(100) has a power-of-two depth >= 100", f"cqe={cq.cqe}")
npolled, wcs = cq.poll(16)
check(npolled == 0 and not wcs, "polling a fresh CQ returns nothing", f"{npolled} {wcs}")
check(errno_of(cq.req_notify) == 0, "req_notify on an empty CQ")
cq.close()

check(errno_of(lambda: CQ(ctx, 0)) == 22, "CQ with 0 entries -> EINVAL")
check(errno_of(lambda: CQ(ctx, attr.max_cqe + 1)) == 22, "CQ above max_cqe -> EINVAL")
big = CQ(ctx, attr.max_cqe)
check(big.cqe >= attr.max_cqe, "CQ of exactly max_cqe entries", f"cqe={big.cqe}")
big.close()
check(errno_of(lambda: CQ(ctx, 8, None, None, ctx.num_comp_vectors)) == 22, "comp_vector out of range -> EINVAL")

ch = CompChannel(ctx)
evcq = CQ(ctx, 10, None, ch, 0)
check(errno_of(evcq.req_notify) == 0 and errno_of(lambda: evcq.req_notify(1)) == 0,
      "req_notify (next and solicited) on a CQ with a completion channel")
evcq.close()
ch.close()

cqs = [CQ(ctx, 1000) for _ in range(64)]
check(all(c.poll(4)[0] == 0 for c in cqs), "64 CQs of 1000 entries coexist and poll empty")
for c in cqs:
    c.close()
# Leave some open: process exit must reclaim them (the wrapper checks dmesg).
leak = [CQ(ctx, 50) for _ in range(8)]
finish()
