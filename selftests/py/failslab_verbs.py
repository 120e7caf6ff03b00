#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Allocation failure at every point of a verb (kernel fault injection).

Usage: failslab_verbs.py DEV GID OP... [--max N] [--limit S]

Needs a kernel with CONFIG_FAILSLAB and CONFIG_FAULT_INJECTION, and
/sys/kernel/debug/failslab/ignore-gfp-wait set to N (the caller sets up
failslab; see rdma/failslab.sh).  For each OP (ctx pd cq qp mr srq ah
qp_rts), for n = 1, 2, ...: write n to /proc/thread-self/fail-nth, which
makes the n-th slab allocation of this thread fail, run the verb, read
fail-nth back and disarm it.  A read-back of 0 means the failure was
injected inside the verb: it must either fail with an errno (ENOMEM) or
succeed (the failed allocation was optional); another errno or a crash
fails the check.  Failures that land outside the verb's kernel path (in
an mmap or brk of Python, libibverbs or pyverbs' own buffers: MemoryError,
PyverbsError without an errno) are counted as "outside" and are no fault.  A non-zero read-back means the verb
made fewer than n allocations: every failure point was covered, the verb
must have succeeded, and the sweep of that OP ends.  At least one point
must have made the verb fail with ENOMEM (else nothing was injected).  Objects made are
destroyed at once.  Before and after each sweep `rdma res show` is read:
its counts for DEV must not have changed (no half-made object left in
ib_core's resource tracking), and the verb must still work normally.

The OPs run one after the other through taplib.run_cases: one TAP line per
OP between "#@ begin OP" and "#@ end OP ok|fail" (one subtest per OP with
lib.sh's py_cases); an OP that raises or runs past --limit seconds fails
and the next one runs.  Exits 1 if any failed.
"""
import argparse
import collections
import ctypes
import errno
import functools
import mmap
import os
import subprocess

import pyverbs.enums as e
from pyverbs.addr import AH
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsError, PyverbsRDMAError
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr

import rclib
from rclib import Dev
from taplib import check, lock_memory, run_cases

MR_LEN = 64 << 10  # bytes of the MR under test (small: the debug kernel pins slowly)


def res_counts(dev):
    out = subprocess.run(["rdma", "res", "show"], capture_output=True, text=True, check=False).stdout
    for line in out.splitlines():
        f = line.split()
        if len(f) > 2 and f[1] == dev + ":":
            return " ".join(f[2:])
    return None


class Ops:
    """The verbs under test, each making one object (or state change) that
    close() undoes."""

    def __init__(self, d):
        self.d = d
        self.cq = d.cq(16)

    def ctx(self):
        return Context(name=self.d.name)

    def pd(self):
        return PD(self.d.ctx)

    def cq_(self):
        return self.d.cq(64)

    def qp(self):
        return self.d.qp(self.cq, self.cq, send_wr=16, recv_wr=16)

    def mr_prep(self):
        # the buffer is mapped before the failure is armed: the sweep is
        # about reg_mr, not about pyverbs' posix_memalign
        self.buf = mmap.mmap(-1, MR_LEN)
        self.buf[0:1] = b"x"
        return None

    def mr(self, _):
        addr = ctypes.addressof(ctypes.c_char.from_buffer(self.buf))
        return MR(self.d.pd, MR_LEN, rclib.ALL_ACCESS, address=addr)

    def srq(self):
        return SRQ(self.d.pd, SrqInitAttr(SrqAttr(max_wr=16, max_sge=1)))

    def ah(self):
        return AH(self.d.pd, attr=rclib.ah_to(self.d, self.d))

    def qp_rts_prep(self):
        return self.d.qp(self.cq, self.cq, send_wr=4, recv_wr=4)

    def qp_rts(self, qp):
        # connected to itself: RESET -> INIT -> RTR -> RTS
        rclib.to_init(qp)
        rclib.to_rtr(qp, self.d, self.d, qp.qp_num, 0, e.IBV_MTU_1024)
        rclib.to_rts(qp, 0)
        return None


class FailNth:
    def __init__(self):
        self.fd = os.open("/proc/thread-self/fail-nth", os.O_RDWR)

    def arm(self, n):
        os.pwrite(self.fd, str(n).encode(), 0)

    def disarm(self):
        left = int(os.pread(self.fd, 32, 0).decode().strip() or 0)
        os.pwrite(self.fd, b"0", 0)
        return left


def sweep(ops, fn, prep, fnth, maxn, no_errno_ok=False):
    """Returns (points covered, errnos seen, problems)."""
    seen = collections.Counter()
    problems = []
    outside = []
    for n in range(1, maxn + 1):
        arg = prep() if prep else None
        obj = err = None
        fnth.arm(n)
        try:
            obj = fn(arg) if prep else fn()
        except PyverbsRDMAError as ex:
            err = ex.error_code
        except (PyverbsError, MemoryError, OSError) as ex:
            err = f"{type(ex).__name__}: {ex}"
            if isinstance(err, str) and len(outside) < 3:
                outside.append(f"n={n}: {err}")
        left = fnth.disarm()
        for o in (obj, arg):
            if o is not None:
                try:
                    o.close()
                except PyverbsError as ex:
                    problems.append(f"n={n}: close() failed after the verb: {ex}")
        if left:
            # fewer than n allocations: the whole path is covered
            if err is not None:
                problems.append(f"n={n}: failed with {err} without an injected failure")
            return n - 1, seen, problems, outside
        if err is None:
            seen["ok"] += 1
        elif isinstance(err, int) and err > 0:
            seen[errno.errorcode.get(err, str(err))] += 1
            # ENOBUFS: an allocation of the routing/neighbour layer (AH
            # and RTR resolve the peer's address) failed.
            if err not in (errno.ENOMEM, errno.ENOBUFS):
                problems.append(f"n={n}: errno {err} ({os.strerror(err)}), want ENOMEM or ENOBUFS")
        elif isinstance(err, int):
            seen["no errno"] += 1
            if not no_errno_ok:
                problems.append(f"n={n}: a verbs error without an errno ({err})")
        else:
            seen["outside"] += 1
    problems.append(f"still allocating after {maxn} failure points")
    return maxn, seen, problems, outside


def sweep_op(dev, ops, op, fn, prep, fnth, maxn):
    """One OP's sweep and its check."""
    before = res_counts(dev)
    # pyverbs' Context() raises ibv_open_device failures without errno
    points, seen, problems, outside = sweep(ops, fn, prep, fnth, maxn, no_errno_ok=(op == "ctx"))
    after = res_counts(dev)
    if before != after:
        problems.append(f"rdma res show {dev}: '{before}' before, '{after}' after")
    try:
        o = prep() if prep else None
        r = fn(o) if prep else fn()
        for x in (r, o):
            if x is not None:
                x.close()
    except PyverbsError as ex:
        problems.append(f"the verb fails after the sweep: {ex}")
    tally = ", ".join(f"{k} {v}" for k, v in sorted(seen.items()))
    print(f"# {op}: {points} failure points ({tally})", flush=True)
    for pr in problems[:10]:
        print(f"#   {pr}", flush=True)
    for o in outside:
        print(f"#   outside the verb: {o}", flush=True)
    if not seen.get("ENOMEM"):
        problems.append("no injected failure made the verb fail (ENOMEM): was anything injected?")
    check(points > 0 and not problems, f"{op}: each of {points} allocation failures -> ENOMEM or success, "
          f"nothing left behind, works afterwards")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("dev")
    p.add_argument("gid", type=int)
    p.add_argument("ops", nargs="+")
    p.add_argument("--max", type=int, default=300)
    p.add_argument("--limit", type=int, default=600, help="seconds an OP's sweep may take")
    a = p.parse_args()
    d = Dev(a.dev, a.gid)
    ops = Ops(d)
    table = {
        "ctx": (ops.ctx, None), "pd": (ops.pd, None), "cq": (ops.cq_, None), "qp": (ops.qp, None),
        "mr": (ops.mr, ops.mr_prep), "srq": (ops.srq, None), "ah": (ops.ah, None),
        "qp_rts": (ops.qp_rts, ops.qp_rts_prep),
    }
    lock_memory()  # no 9p page faults while a failure is armed
    fnth = FailNth()
    cases = {op: functools.partial(sweep_op, a.dev, ops, op, fn, prep, fnth, a.max) for op, (fn, prep) in table.items()}
    # The OPs share the device context and helpers above: no per-case setup.
    run_cases(cases, a.ops, lambda: (), a.limit)


if __name__ == "__main__":
    main()
