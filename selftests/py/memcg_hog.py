#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Creates queue pairs of the maximum size until the kernel refuses one
(memcg.sh runs it as an unprivileged user inside a small memory cgroup, or
under a lowered per-context limit).

Usage: memcg_hog.py DEV GID_INDEX MAX_QPS STOP_KB

Every QP has max_qp_wr send and receive entries (tens of MiB of kernel
memory each on rroce: rings, their private copies, slots).  Stops at the
first failure, after MAX_QPS QPs, or once MemAvailable has dropped by more
than STOP_KB (the charge does not hold: stop before the machine suffers).
Prints one line

    qps=N errno=E errname=NAME dropped_kb=K ring_kb=R

(errno 0: it stopped without a failure), then holds the QPs for a moment
so the caller can read the cgroup's memory.current, and exits 0.
"""
import errno
import sys
import time

from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPCap, QPInitAttr
import pyverbs.enums as e

import rclib


def avail_kb():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1])
    return 0


def main():
    dev, gidx, max_qps, stop_kb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    d = rclib.Dev(dev, gidx)
    wr = d.dev_attr.max_qp_wr
    cq = d.cq(16)
    qps, err = [], 0
    a0 = avail_kb()
    while len(qps) < max_qps and a0 - avail_kb() < stop_kb:
        cap = QPCap(max_send_wr=wr, max_recv_wr=wr, max_send_sge=1, max_recv_sge=1)
        try:
            qps.append(QP(d.pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap)))
        except PyverbsRDMAError as ex:
            err = ex.error_code if ex.error_code and ex.error_code > 0 else -1
            break
    # The rings of one QP: entries x 128 B (the provider's send and
    # receive WQE strides are at least that), twice.
    ring_kb = wr * 128 * 2 // 1024
    print(f"qps={len(qps)} errno={err} errname={errno.errorcode.get(err, '-')} dropped_kb={a0 - avail_kb()} "
          f"ring_kb={ring_kb}", flush=True)
    time.sleep(1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
