#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""A process whose device goes away under it (TAP checks).

Usage: disassociate.py DEV GID_INDEX

Opens DEV, registers an 8 MiB MR and connects two RC QPs of DEV to each
other (the device's loopback), checks one verified RDMA WRITE, prints
"ready" and then keeps RDMA-WRITEing 64 KiB until the device is removed
by someone else (`rdma link delete`, `ip link del`, `rmmod`; at most 120 s).
Then it checks what a hardware driver's disassociate_ucontext gives a
process:
  - IBV_EVENT_DEVICE_FATAL on the context's async event fd;
  - the pinned pages are released while the process still runs (VmPin 0);
  - verbs that need the kernel fail with EIO (alloc_pd, query_device);
  - posting does not crash, no successful completion appears, and once
    the CQ is empty polling it fails with EIO (the kernel closed its ring)
    instead of returning nothing forever;
  - destroying every object and closing the context succeeds.
"""
import errno
import select
import sys
import time

import pyverbs.enums as e
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsError, PyverbsRDMAError
from pyverbs.wr import SGE, SendWR

import rclib
from rclib import Dev, poll, status_str
from srq_verbs import event_fds
from taplib import check, errno_of, finish, vm_pin_kb

EV_NAME = {getattr(e, n): n for n in dir(e) if n.startswith("IBV_EVENT_")}
SIZE = 8 << 20
CHUNK = 64 << 10


def main():
    before = event_fds()
    d = Dev(sys.argv[1], int(sys.argv[2]))
    fds = event_fds() - before
    check(len(fds) == 1, "found the context's async event fd", f"candidates {fds}")
    if len(fds) != 1:
        finish()
    evfd = fds.pop()
    src, dst = d.mr(SIZE), d.mr(SIZE)
    cq = d.cq(64)
    qp0, qp1 = d.qp(cq, cq, send_wr=32), d.qp(cq, cq, send_wr=32)
    rclib.connect(d, qp0, 100, d, qp1, 200, d.active_mtu())
    pattern = bytes((i * 7 + 3) & 0xFF for i in range(CHUNK))
    src.write(pattern, CHUNK, 0)

    def write(off):
        wr = SendWR(wr_id=off, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1,
                    sg=[SGE(src.buf, CHUNK, src.lkey)], send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_rdma(dst.rkey, dst.buf + off)
        qp0.post_send(wr)

    write(0)
    wcs = poll(cq, 1, time.monotonic() + 30)
    ok = len(wcs) == 1 and wcs[0].status == e.IBV_WC_SUCCESS and dst.read(CHUNK, 0) == pattern
    check(ok, "a verified 64 KiB RDMA WRITE before the removal",
          f"{[status_str(w.status) for w in wcs]}")
    pin = vm_pin_kb()
    check(pin >= 2 * SIZE // 1024, f"16 MiB pinned (VmPin {pin} kB)")
    print("ready", flush=True)

    # Traffic until the device goes: DEVICE_FATAL (port and GID events
    # may come first: a netdev going away goes down and loses its
    # addresses), or a post that fails.
    event = None
    others = []
    post_err = None
    good_after = 0
    n = 0
    end = time.monotonic() + 120
    while time.monotonic() < end and event is None:
        r, _, _ = select.select([evfd], [], [], 0)
        if r:
            ev = d.ctx.get_async_event()
            t = ev.event_type
            ev.ack()
            if t == e.IBV_EVENT_DEVICE_FATAL:
                event = t
                break
            others.append(EV_NAME.get(t, t))
            continue
        if post_err is None:
            try:
                write((n % (SIZE // CHUNK)) * CHUNK)
                n += 1
            except PyverbsRDMAError as ex:
                post_err = ex.error_code
        try:
            for w in poll(cq, 1, time.monotonic() + 0.05):
                if post_err is not None and w.status == e.IBV_WC_SUCCESS:
                    good_after += 1
        except PyverbsError:
            pass  # the CQ was destroyed under us; checked below
        if post_err is not None:
            r, _, _ = select.select([evfd], [], [], 1)
    print(f"# {n} writes posted; post error: {errno.errorcode.get(post_err, post_err)}; "
          f"events before DEVICE_FATAL: {others}", flush=True)
    check(event == e.IBV_EVENT_DEVICE_FATAL, "IBV_EVENT_DEVICE_FATAL delivered")
    check(post_err in (None, errno.EIO), "posting after the removal: no error, or EIO",
          f"errno {post_err}")
    # The objects are gone in the kernel: their pages must be unpinned now.
    deadline = time.monotonic() + 20
    while vm_pin_kb() != 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    pin = vm_pin_kb()
    check(pin == 0, "the MRs' pages are unpinned while the process still runs", f"VmPin {pin} kB")
    check(errno_of(lambda: PD(d.ctx)) == errno.EIO, "alloc_pd after the removal fails with EIO",
          f"errno {errno_of(lambda: PD(d.ctx))}")
    check(errno_of(d.ctx.query_device) == errno.EIO, "query_device after the removal fails with EIO")
    try:
        write(0)
        posted = "posted"
    except PyverbsRDMAError as ex:
        posted = f"errno {ex.error_code}"
    late = []
    poll_err = None
    try:
        late = poll(cq, 4, time.monotonic() + 0.5)
        cq.poll(1)
    except PyverbsError as ex:
        poll_err = ex
    check(all(w.status != e.IBV_WC_SUCCESS for w in late),
          f"no successful completion after the removal (post: {posted})",
          f"{[status_str(w.status) for w in late]}")
    check(poll_err is not None, "polling the destroyed CQ fails instead of returning nothing",
          f"late completions {len(late)}")
    print(f"# poll after the removal: {poll_err}", flush=True)
    try:
        for obj in (qp0, qp1, cq, src, dst, d.pd, d.ctx):
            obj.close()
        closed = None
    except (PyverbsError, PyverbsRDMAError) as ex:
        closed = ex
    check(closed is None, "destroying every object and closing the context succeeds", f"{closed}")
    finish()


if __name__ == "__main__":
    main()
