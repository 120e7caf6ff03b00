#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Extended verbs with byte-verified data (TAP subtests).

Usage: ex_verbs.py DEV0 GID0 DEV1 GID1

An RC QP pair (ibv_create_qp_ex with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) on
CQs made by ibv_create_cq_ex with IBV_WC_STANDARD_FLAGS, DEV0 requester,
DEV1 responder, connected directly in one process.  Every request is
posted with the ibv_wr_* API and every completion is read with
start_poll/next_poll/end_poll and the ibv_wc_read_* functions: status,
opcode, wr_id order, byte_len, immediate data, QP number and wc_flags.
Every byte is checked where it lands:

  - a batch of SEND_WITH_IMM (1, 1000 and 5000 bytes, the last segmented
    by the path MTU, from an SGE list) and an inline SEND (inline data
    list) with one wr_complete;
  - RDMA_WRITE from an SGE list and RDMA_WRITE_WITH_IMM from inline data
    in one batch; RDMA_READ back into a second buffer;
  - ATOMIC_CMP_AND_SWP and ATOMIC_FETCH_AND_ADD: the old values land in
    the local buffer, the remote 64-bit word is updated;
  - wr_abort posts nothing; a batch with too much inline data fails as a
    whole (EINVAL) and posts nothing;
  - completion timestamps: query_device_ex reports a 64-bit mask and a
    1 GHz clock; ibv_query_rt_values_ex and the device timestamps of a
    send and a receive completion (CQs with IBV_WC_EX_WITH_COMPLETION_
    TIMESTAMP and _WALLCLOCK) lie between CLOCK_MONOTONIC readings taken
    around the transfer, receive before send, and the wall-clock reading
    between time.time_ns() readings;
  - EOPNOTSUPP for what rroce lacks (TSO, RDMA on UD).  (Memory-window
    binds: mw_verbs.py.)
"""
import errno
import os
import sys
import time

import pyverbs.enums as e
from pyverbs.cq import CQEX, CqInitAttrEx, PollCqAttr
from pyverbs.pyverbs_error import PyverbsError, PyverbsRDMAError
from pyverbs.qp import DataBuffer, QPCap, QPEx, QPInitAttrEx
from pyverbs.wr import SGE, RecvWR

import rclib
from rclib import Dev, opcode_str, status_str
from taplib import check, errno_of, finish

RC_OPS = (e.IBV_QP_EX_WITH_SEND | e.IBV_QP_EX_WITH_SEND_WITH_IMM | e.IBV_QP_EX_WITH_RDMA_WRITE |
          e.IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | e.IBV_QP_EX_WITH_RDMA_READ |
          e.IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | e.IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)
DEADLINE = 30 * int(os.environ.get("RROCE_TIMEOUT_SCALE", "1"))


def cq_ex(dev, wc_flags=e.IBV_WC_STANDARD_FLAGS):
    return CQEX(dev.ctx, CqInitAttrEx(cqe=64, wc_flags=wc_flags))


def qp_ex(dev, cq, qpt=e.IBV_QPT_RC, ops=RC_OPS):
    cap = QPCap(max_send_wr=16, max_recv_wr=16, max_send_sge=2, max_recv_sge=2, max_inline_data=64)
    attr = QPInitAttrEx(qp_type=qpt, scq=cq, rcq=cq, cap=cap, pd=dev.pd, send_ops_flags=ops,
                        comp_mask=e.IBV_QP_INIT_ATTR_PD | e.IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)
    return QPEx(dev.ctx, attr)


def poll_ex(cq, want, deadline=None):
    """Up to `want` completions of an extended CQ, as dicts."""
    deadline = deadline or time.monotonic() + DEADLINE
    got = []
    while len(got) < want:
        rc = cq.start_poll(PollCqAttr())
        if rc == errno.ENOENT:
            if time.monotonic() >= deadline:
                break
            time.sleep(0.001)
            continue
        if rc != 0:
            check(False, "start_poll returns 0 or ENOENT", f"rc={rc}")
            break
        while True:
            got.append({"wr_id": cq.wr_id, "status": cq.status, "opcode": cq.read_opcode(),
                        "len": cq.read_byte_len(), "imm": cq.read_imm_data(), "qp": cq.read_qp_num(),
                        "flags": cq.read_wc_flags()})
            if len(got) >= want or cq.poll_next() != 0:
                break
        cq.end_poll()
    return got


def describe(wcs):
    return "; ".join(f"wr_id={w['wr_id']:#x} {status_str(w['status'])} {opcode_str(w['opcode'])} "
                     f"len={w['len']} imm={w['imm']:#x} qp={w['qp']} flags={w['flags']:#x}" for w in wcs)


def expect_wcs(cq, want, desc):
    """Poll len(want) completions and compare the given fields."""
    got = poll_ex(cq, len(want))
    ok = len(got) == len(want)
    for g, w in zip(got, want):
        ok = ok and all(g[k] == v for k, v in w.items())
    check(ok, desc, f"got [{describe(got)}] want {want}")
    return got


def imm_be(v):
    """ibv_wc_read_imm_data's value (a __be32 in memory) for host value v."""
    return int.from_bytes(v.to_bytes(4, "big"), sys.byteorder)


def main():
    dev0, g0, dev1, g1 = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    d0, d1 = Dev(dev0, g0), Dev(dev1, g1)

    cq0, cq1 = cq_ex(d0), cq_ex(d1)
    check(cq0.start_poll(PollCqAttr()) == errno.ENOENT, "start_poll on an empty CQ -> ENOENT")
    check(errno_of(lambda: qp_ex(d0, cq0, ops=RC_OPS | e.IBV_QP_EX_WITH_TSO)) == errno.EOPNOTSUPP,
          "create_qp_ex with IBV_QP_EX_WITH_TSO -> EOPNOTSUPP")
    check(errno_of(lambda: qp_ex(d0, cq0, e.IBV_QPT_UD, e.IBV_QP_EX_WITH_RDMA_WRITE)) == errno.EOPNOTSUPP,
          "create_qp_ex UD with IBV_QP_EX_WITH_RDMA_WRITE -> EOPNOTSUPP")

    qp0, qp1 = qp_ex(d0, cq0), qp_ex(d1, cq1)
    rclib.connect(d0, qp0, 0x10, d1, qp1, 0x20, d0.active_mtu())
    mr0, mr1 = d0.mr(1 << 16), d1.mr(1 << 16)
    src = os.urandom(1 << 15)
    mr0.write(src, len(src))
    mr1.write(bytes(1 << 16), 1 << 16)

    # 1. SEND_WITH_IMM x3 from SGE lists + an inline SEND, one batch.
    sizes = [1, 1000, 5000]
    offs = [0, 100, 2000]
    for i in range(4):
        qp1.post_recv(RecvWR(wr_id=0x100 + i, num_sge=1,
                             sg=[SGE(mr1.buf + 0x1000 * (i + 1) * 2, 0x2000, mr1.lkey)]))
    qp0.wr_start()
    for i, (n, o) in enumerate(zip(sizes, offs)):
        qp0.wr_id = 0x10 + i
        qp0.wr_flags = e.IBV_SEND_SIGNALED
        qp0.wr_send_imm(0xabc000 + i)
        half = n // 2
        qp0.wr_set_sge_list(2, [SGE(mr0.buf + o, half, mr0.lkey), SGE(mr0.buf + o + half, n - half, mr0.lkey)])
    qp0.wr_id = 0x13
    qp0.wr_flags = e.IBV_SEND_SIGNALED
    qp0.wr_send()
    qp0.wr_set_inline_data_list(2, [DataBuffer(mr0.buf + 7000, 30), DataBuffer(mr0.buf + 9000, 10)])
    qp0.wr_complete()
    expect_wcs(cq0, [{"wr_id": 0x10 + i, "status": e.IBV_WC_SUCCESS, "opcode": e.IBV_WC_SEND, "qp": qp0.qp_num}
                     for i in range(4)], "one batch of 4 SENDs: 4 send completions in order (start/next_poll)")
    want = [{"wr_id": 0x100 + i, "status": e.IBV_WC_SUCCESS, "opcode": e.IBV_WC_RECV, "len": n,
             "imm": imm_be(0xabc000 + i), "flags": e.IBV_WC_WITH_IMM, "qp": qp1.qp_num}
            for i, n in enumerate(sizes)]
    want.append({"wr_id": 0x103, "status": e.IBV_WC_SUCCESS, "opcode": e.IBV_WC_RECV, "len": 40, "flags": 0})
    expect_wcs(cq1, want, "receive completions: byte_len, immediate, wc_flags, qp_num (read_* functions)")
    ok = all(mr1.read(n, 0x2000 * (i + 1)) == src[o:o + n] for i, (n, o) in enumerate(zip(sizes, offs)))
    ok = ok and mr1.read(40, 0x8000) == src[7000:7030] + src[9000:9010]
    check(ok, "SEND data (SGE lists, MTU-segmented, inline list) arrived byte for byte")

    # 2. RDMA WRITE (SGE list) + WRITE_WITH_IMM (inline), then READ back.
    qp1.post_recv(RecvWR(wr_id=0x200, num_sge=1, sg=[SGE(mr1.buf + 0xd000, 64, mr1.lkey)]))
    qp0.wr_start()
    qp0.wr_id = 0x20
    qp0.wr_flags = e.IBV_SEND_SIGNALED
    qp0.wr_rdma_write(mr1.rkey, mr1.buf + 0xa000)
    qp0.wr_set_sge_list(2, [SGE(mr0.buf + 10000, 3000, mr0.lkey), SGE(mr0.buf + 20000, 1500, mr0.lkey)])
    qp0.wr_id = 0x21
    qp0.wr_rdma_write_imm(mr1.rkey, mr1.buf + 0xc000, 0x5eed)
    qp0.wr_set_inline_data(mr0.buf + 30000, 50)
    qp0.wr_complete()
    expect_wcs(cq0, [{"wr_id": 0x20, "status": e.IBV_WC_SUCCESS, "opcode": e.IBV_WC_RDMA_WRITE},
                     {"wr_id": 0x21, "status": e.IBV_WC_SUCCESS, "opcode": e.IBV_WC_RDMA_WRITE}],
               "RDMA_WRITE + RDMA_WRITE_WITH_IMM batch: completions")
    expect_wcs(cq1, [{"wr_id": 0x200, "status": e.IBV_WC_SUCCESS, "opcode": e.IBV_WC_RECV_RDMA_WITH_IMM,
                      "imm": imm_be(0x5eed), "flags": e.IBV_WC_WITH_IMM}],
               "RDMA_WRITE_WITH_IMM: receive completion with the immediate")
    check(mr1.read(4500, 0xa000) == src[10000:13000] + src[20000:21500]
          and mr1.read(50, 0xc000) == src[30000:30050], "RDMA WRITE data landed byte for byte")
    qp0.wr_start()
    qp0.wr_id = 0x22
    qp0.wr_flags = e.IBV_SEND_SIGNALED
    qp0.wr_rdma_read(mr1.rkey, mr1.buf + 0xa000)
    qp0.wr_set_sge(SGE(mr0.buf + 0x8000, 4500, mr0.lkey))
    qp0.wr_complete()
    expect_wcs(cq0, [{"wr_id": 0x22, "status": e.IBV_WC_SUCCESS, "opcode": e.IBV_WC_RDMA_READ, "len": 4500}],
               "RDMA_READ completion with byte_len")
    check(mr0.read(4500, 0x8000) == src[10000:13000] + src[20000:21500], "RDMA READ data came back byte for byte")

    # 3. Atomics on the 64-bit word at mr1 + 0xe000.
    start = 0x1122334455667788
    mr1.write(start.to_bytes(8, sys.byteorder), 8, 0xe000)
    qp0.wr_start()
    qp0.wr_id = 0x30
    qp0.wr_flags = e.IBV_SEND_SIGNALED
    qp0.wr_atomic_cmp_swp(mr1.rkey, mr1.buf + 0xe000, start, 0x0102030405060708)
    qp0.wr_set_sge(SGE(mr0.buf + 0xf000, 8, mr0.lkey))
    qp0.wr_id = 0x31
    qp0.wr_atomic_fetch_add(mr1.rkey, mr1.buf + 0xe000, 5)
    qp0.wr_set_sge(SGE(mr0.buf + 0xf008, 8, mr0.lkey))
    qp0.wr_complete()
    expect_wcs(cq0, [{"wr_id": 0x30, "status": e.IBV_WC_SUCCESS, "opcode": e.IBV_WC_COMP_SWAP},
                     {"wr_id": 0x31, "status": e.IBV_WC_SUCCESS, "opcode": e.IBV_WC_FETCH_ADD}],
               "CMP_AND_SWP + FETCH_AND_ADD batch: completions")
    old = [int.from_bytes(mr0.read(8, 0xf000 + 8 * i), sys.byteorder) for i in range(2)]
    now = int.from_bytes(mr1.read(8, 0xe000), sys.byteorder)
    check(old == [start, 0x0102030405060708] and now == 0x0102030405060708 + 5,
          "atomics: old values returned, remote word swapped then added", f"old={old} now={now:#x}")

    # 4. wr_abort and a failing batch post nothing.
    qp1.post_recv(RecvWR(wr_id=0x400, num_sge=1, sg=[SGE(mr1.buf, 64, mr1.lkey)]))
    qp0.wr_start()
    qp0.wr_id = 0x40
    qp0.wr_send()
    qp0.wr_set_sge(SGE(mr0.buf, 16, mr0.lkey))
    qp0.wr_abort()
    qp0.wr_start()
    qp0.wr_id = 0x41
    qp0.wr_send()
    qp0.wr_set_sge(SGE(mr0.buf, 16, mr0.lkey))
    qp0.wr_id = 0x42
    qp0.wr_send()
    qp0.wr_set_inline_data(mr0.buf, 65)
    err = errno_of(qp0.wr_complete)
    check(err == errno.EINVAL, "a batch with 65 bytes of inline data (max 64) fails with EINVAL", f"{err}")
    qp0.wr_start()
    qp0.wr_id = 0x43
    qp0.wr_flags = e.IBV_SEND_SIGNALED
    qp0.wr_send()
    qp0.wr_set_sge(SGE(mr0.buf + 500, 16, mr0.lkey))
    qp0.wr_complete()
    expect_wcs(cq0, [{"wr_id": 0x43, "status": e.IBV_WC_SUCCESS}],
               "after wr_abort and a failed batch only the next request completes")
    expect_wcs(cq1, [{"wr_id": 0x400, "status": e.IBV_WC_SUCCESS, "len": 16}], "the peer received one message")
    check(mr1.read(16, 0) == src[500:516], "... with the data of that request")
    time.sleep(0.2)
    extra = poll_ex(cq0, 4, time.monotonic()) + poll_ex(cq1, 4, time.monotonic())
    check(not extra, "no extra completions", describe(extra))

    for o in (qp0, qp1, cq0, cq1):
        o.close()
    timestamps(d0, d1, mr0, mr1)
    mr0.close()
    mr1.close()
    finish()


TS = e.IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | e.IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK


def timestamps(d0, d1, mr0, mr1):
    """Completion timestamps: the device clock is CLOCK_MONOTONIC in ns."""
    a = d0.ctx.query_device_ex()
    check(a.completion_timestamp_mask == 2**64 - 1 and a.hca_core_clock == 1_000_000,
          "query_device_ex: completion_timestamp_mask 2^64-1, hca_core_clock 1 GHz",
          f"mask {a.completion_timestamp_mask:#x}, clock {a.hca_core_clock} kHz")
    t0 = time.monotonic_ns()
    sec, raw = d0.ctx.query_rt_values_ex()  # raw ticks (ns) in tv_nsec
    t1 = time.monotonic_ns()
    check(sec == 0 and t0 <= raw <= t1, "ibv_query_rt_values_ex: the device clock is CLOCK_MONOTONIC ns",
          f"{t0} {sec}:{raw} {t1}")
    cs, cr = cq_ex(d0, e.IBV_WC_STANDARD_FLAGS | TS), cq_ex(d1, e.IBV_WC_STANDARD_FLAGS | TS)
    q0, q1 = qp_ex(d0, cs), qp_ex(d1, cr)
    rclib.connect(d0, q0, 0x30, d1, q1, 0x40, d0.active_mtu())
    q1.post_recv(RecvWR(wr_id=0x600, num_sge=1, sg=[SGE(mr1.buf, 4096, mr1.lkey)]))
    m0, w0 = time.monotonic_ns(), time.time_ns()
    q0.wr_start()
    q0.wr_id = 0x60
    q0.wr_flags = e.IBV_SEND_SIGNALED
    q0.wr_send()
    q0.wr_set_sge(SGE(mr0.buf, 1000, mr0.lkey))
    q0.wr_complete()
    got = {}
    deadline = time.monotonic() + DEADLINE
    for name, cq in (("send", cs), ("recv", cr)):
        while time.monotonic() < deadline:
            if cq.start_poll(PollCqAttr()) == 0:
                got[name] = (cq.status, cq.read_timestamp(), cq.read_completion_wallclock_ns())
                cq.end_poll()
                break
            time.sleep(0.001)
    m1, w1 = time.monotonic_ns(), time.time_ns()
    ok = all(n in got and got[n][0] == e.IBV_WC_SUCCESS for n in ("send", "recv"))
    check(ok, "a SEND between two timestamping CQs completes on both", str(got))
    if ok:
        (_, ts_s, wall_s), (_, ts_r, wall_r) = got["send"], got["recv"]
        check(m0 <= ts_r <= ts_s <= m1, "device timestamps: receive, then send (its ACK), within the transfer",
              f"{m0} recv {ts_r} send {ts_s} {m1}")
        # the wall-clock reading converts with the offset of the clocks at
        # the read: allow a millisecond of slack for a clock step
        check(all(w0 - 10**6 <= w <= w1 + 10**6 for w in (wall_s, wall_r)),
              "wall-clock timestamps within the transfer (CLOCK_REALTIME ns)", f"{w0} {wall_s} {wall_r} {w1}")
    for o in (q0, q1, cs, cr):
        o.close()


try:
    main()
except (PyverbsRDMAError, PyverbsError) as ex:
    check(False, "verbs call failed", str(ex))
    finish()
