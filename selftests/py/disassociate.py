#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""A process whose device goes away under it (TAP checks).

Usage: disassociate.py DEV GID_INDEX [unpolled]

Opens DEV, registers an 8 MiB MR and connects two RC QPs of DEV to each
other (the device's loopback), checks one verified RDMA WRITE, prints
"ready" and then keeps RDMA-WRITEing 64 KiB until the device is removed
by someone else (`rdma link delete`, `ip link del`, `rmmod`; at most 120 s);
"unpolled": it posts as many WRITEs as its send queue holds and polls
nothing until the device is gone, so their completions are still in the CQ.
Then it checks what a hardware driver's disassociate_ucontext gives a
process:
  - IBV_EVENT_DEVICE_FATAL on the context's async event fd;
  - the pinned pages are released while the process still runs (VmPin 0);
  - verbs that need the kernel fail with EIO (alloc_pd, query_device);
  - posting does not crash (EIO, or ENOMEM only if the send queue was
    full: traffic may stall while a netdev goes down, before the removal);
  - completions already in the CQ ring may still be polled, but a
    successful one must be of a WRITE whose data is in place; once the CQ
    is empty polling it fails with EIO (the kernel closed its ring)
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
    unpolled = sys.argv[3:] == ["unpolled"]
    fds = event_fds() - before
    check(len(fds) == 1, "found the context's async event fd", f"candidates {fds}")
    if len(fds) != 1:
        finish()
    evfd = fds.pop()
    src, dst = d.mr(SIZE), d.mr(SIZE)
    dst.write(bytes(SIZE), SIZE, 0)  # zeroed: the data checks below rely on it
    cq = d.cq(64)
    depth = 32
    qp0, qp1 = d.qp(cq, cq, send_wr=depth), d.qp(cq, cq, send_wr=depth)
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
    # addresses), or a post that fails.  ENOMEM (send queue full: the
    # WRITEs complete slower than they are posted, or stall while the
    # netdev goes down) is not a failure of the post: polling frees room.
    event = None
    others = []
    post_err = None
    full = 0  # ENOMEM with the send queue full
    bad_full = None  # ENOMEM with fewer than `depth` WRITEs outstanding
    polled = 1  # the verified WRITE
    good = []  # successful completions, checked below
    n = 1
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
        refused = post_err is not None or (unpolled and n - polled >= depth)
        if not refused:
            try:
                write((n % (SIZE // CHUNK)) * CHUNK)
                n += 1
            except PyverbsRDMAError as ex:
                refused = True
                if ex.error_code == errno.ENOMEM and n - polled >= depth:
                    full += 1
                elif ex.error_code == errno.ENOMEM:
                    if bad_full is None:
                        bad_full = n - polled
                else:
                    post_err = ex.error_code
        if unpolled:
            if refused:  # full (or gone): wait for the event
                r, _, _ = select.select([evfd], [], [], 0.05)
            continue
        try:
            for w in poll(cq, 1, time.monotonic() + 0.05):
                polled += 1
                if w.status == e.IBV_WC_SUCCESS:
                    good.append(w.wr_id)
        except PyverbsError:
            pass  # the CQ was destroyed under us; checked below
        if post_err is not None:
            r, _, _ = select.select([evfd], [], [], 1)
    print(f"# {n} writes posted; post error: {errno.errorcode.get(post_err, post_err)}; "
          f"send queue full {full} times; events before DEVICE_FATAL: {others}", flush=True)
    check(event == e.IBV_EVENT_DEVICE_FATAL, "IBV_EVENT_DEVICE_FATAL delivered")
    check(post_err in (None, errno.EIO) and bad_full is None,
          "posting after the removal: no error, or EIO (ENOMEM only with a full send queue)",
          f"errno {post_err}" if bad_full is None else f"ENOMEM with {bad_full} of {depth} outstanding")
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
    # What the ring still holds (at most the CQ's 64 entries), until polling
    # fails or returns nothing.
    late = []
    poll_err = None
    try:
        while len(late) <= 64:
            k, wcs = cq.poll(16)
            if not k:
                break
            late.extend(wcs[:k])
    except PyverbsError as ex:
        poll_err = ex
    good += [w.wr_id for w in late if w.status == e.IBV_WC_SUCCESS]
    print(f"# {len(late)} completions left in the CQ after the removal", flush=True)
    # A successful completion is of a WRITE that happened: its 64 KiB are
    # in place at its offset (the destination starts zeroed; with more than
    # SIZE // CHUNK WRITEs an offset is written again, so then this only
    # shows that one of them landed).
    missing = [hex(off) for off in good if dst.read(CHUNK, off) != pattern]
    check(not missing,
          f"every successful completion is of a WRITE whose data is in place (post after the removal: {posted})",
          f"{n} WRITEs posted, data missing at {missing[:4]} of {len(good)} successful; late "
          f"{[status_str(w.status) for w in late][:8]}")
    check(poll_err is not None, "polling the destroyed CQ, once empty, fails instead of returning nothing",
          f"{len(late)} late completions, then nothing")
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
