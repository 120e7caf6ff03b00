#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""UC (Unreliable Connected) data path checks between two devices in one
process (DEV0 = requester, DEV1 = responder; packets cross the veth).

Usage: uc_checks.py DEV0 GID0 DEV1 GID1 CASE [IF0]      (uc_checks.py --list)

Cases:
  ops   RDMA READ and atomics cannot be posted on UC (EINVAL, the QP stays
        in RTS); SEND and SEND with immediate (1 and 64 packets), RDMA
        WRITE and WRITE with immediate move data intact with the right
        completions on both sides; no ACKs are needed (the requester
        completes on its own).
  loss  with netem "loss 5%" on IF0 (the requester's egress), 150 SENDs of
        8 KiB (8 packets each) with immediate = sequence number: every send
        completes successfully; the receiver gets a subset, in order, each
        exactly once and intact (never a partial or corrupted message in a
        completed receive), its receives complete in posting order with no
        error; then without loss 20 more all arrive.
"""
import errno
import subprocess
import sys
import time

import pyverbs.enums as e
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.wr import SGE, RecvWR, SendWR

import rclib
from rclib import ALL_ACCESS, Dev, state_str, wc_str
from taplib import check, errno_of, finish

POLL_S = 60


def pattern(n, seed):
    return bytes(((i * 13) ^ seed ^ (i >> 8)) & 0xFF for i in range(n))


class UcPair:
    def __init__(self, d0, d1, size, recv_wr=16, send_wr=16):
        self.cq0 = d0.cq(max(64, send_wr * 2))
        self.cq1 = d1.cq(max(64, recv_wr * 2))
        self.qp0 = d0.qp(self.cq0, self.cq0, send_wr=send_wr, recv_wr=16, qp_type=e.IBV_QPT_UC)
        self.qp1 = d1.qp(self.cq1, self.cq1, send_wr=16, recv_wr=recv_wr, qp_type=e.IBV_QPT_UC)
        self.mr0 = d0.mr(size)
        self.mr1 = d1.mr(size)
        self.size = size
        mtu = rclib.MTU_ENUM[1024]
        # UC: INIT with access flags, RTR with AV/MTU/dest QPN/RQ PSN, RTS
        # with the SQ PSN only.
        for qp in (self.qp0, self.qp1):
            rclib.to_init(qp, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE)
        for qp, src, dst, peer, psn in ((self.qp0, d0, d1, self.qp1, 0x300), (self.qp1, d1, d0, self.qp0, 0x100)):
            a = rclib.qp_attr(e.IBV_QPS_RTR, path_mtu=mtu, dest_qp_num=peer.qp_num, rq_psn=psn,
                              ah_attr=rclib.ah_to(src, dst))
            qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_AV | e.IBV_QP_PATH_MTU | e.IBV_QP_DEST_QPN | e.IBV_QP_RQ_PSN)
        for qp, psn in ((self.qp0, 0x100), (self.qp1, 0x300)):
            qp.modify(rclib.qp_attr(e.IBV_QPS_RTS, sq_psn=psn), e.IBV_QP_STATE | e.IBV_QP_SQ_PSN)

    def send(self, wr_id, opcode, length, off=0, raddr=None, imm=None, signaled=True):
        sge = SGE(self.mr0.buf + off, length, self.mr0.lkey)
        wr = SendWR(wr_id=wr_id, opcode=opcode, num_sge=1, sg=[sge],
                    send_flags=e.IBV_SEND_SIGNALED if signaled else 0)
        if imm is not None:
            wr.imm_data = imm
        if raddr is not None:
            wr.set_wr_rdma(self.mr1.rkey, raddr)
        self.qp0.post_send(wr)

    def recv(self, wr_id, length, off=0):
        self.qp1.post_recv(RecvWR(wr_id=wr_id, num_sge=1, sg=[SGE(self.mr1.buf + off, length, self.mr1.lkey)]))


def poll_n(cq, n, what):
    got = rclib.poll(cq, n, time.monotonic() + POLL_S)
    check(len(got) == n, f"{what}: {n} completion(s)", f"got {len(got)}: " + "; ".join(wc_str(w) for w in got[:4]))
    return got


def case_ops(d0, d1):
    n = 65536
    p = UcPair(d0, d1, 8 * n)
    wr = SendWR(wr_id=9, opcode=e.IBV_WR_RDMA_READ, num_sge=1, sg=[SGE(p.mr0.buf, 8, p.mr0.lkey)],
                send_flags=e.IBV_SEND_SIGNALED)
    wr.set_wr_rdma(p.mr1.rkey, p.mr1.buf)
    check(errno_of(lambda: p.qp0.post_send(wr)) == errno.EINVAL, "RDMA READ on UC: ibv_post_send -> EINVAL")
    for op, name in ((e.IBV_WR_ATOMIC_FETCH_AND_ADD, "FETCH_AND_ADD"), (e.IBV_WR_ATOMIC_CMP_AND_SWP, "CMP_AND_SWP")):
        wr = SendWR(wr_id=9, opcode=op, num_sge=1, sg=[SGE(p.mr0.buf, 8, p.mr0.lkey)], send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_atomic(p.mr1.rkey, p.mr1.buf, 1, 2)
        check(errno_of(lambda: p.qp0.post_send(wr)) == errno.EINVAL, f"ATOMIC {name} on UC: ibv_post_send -> EINVAL")
    st = rclib.qp_state(p.qp0)
    check(st == e.IBV_QPS_RTS, "the UC QP stays in RTS", state_str(st))
    check(not rclib.drain(p.cq0, 0.3), "no completion for the refused WRs")

    # SEND 64 KiB (64 packets), SEND with immediate 1 B, WRITE 64 KiB,
    # WRITE with immediate 3000 B (3 packets), zero-length SEND.
    srcs = [pattern(n, 1), pattern(1, 2), pattern(n, 3), pattern(3000, 4)]
    for i, s in enumerate(srcs):
        p.mr0.write(s, len(s), i * n)
    p.mr1.write(bytes(4 * n), 4 * n, 0)
    p.recv(101, n, 0)
    p.recv(102, n, n)
    p.recv(103, 16, 2 * n)  # WRITE with immediate consumes one (its buffer is not used)
    p.recv(104, 16, 2 * n + 64)
    p.send(1, e.IBV_WR_SEND, n, 0)
    p.send(2, e.IBV_WR_SEND_WITH_IMM, 1, n, imm=0x11223344)
    p.send(3, e.IBV_WR_RDMA_WRITE, n, 2 * n, raddr=p.mr1.buf + 4 * n)
    p.send(4, e.IBV_WR_RDMA_WRITE_WITH_IMM, 3000, 3 * n, raddr=p.mr1.buf + 5 * n, imm=0x55667788)
    p.send(5, e.IBV_WR_SEND, 0, 0)
    w0 = poll_n(p.cq0, 5, "requester")
    want0 = [(1, e.IBV_WC_SEND), (2, e.IBV_WC_SEND), (3, e.IBV_WC_RDMA_WRITE), (4, e.IBV_WC_RDMA_WRITE),
             (5, e.IBV_WC_SEND)]
    check([(w.wr_id, w.opcode, w.status) for w in w0] == [(i, o, 0) for i, o in want0],
          "requester: five successful completions in order with the right opcodes",
          "; ".join(wc_str(w) for w in w0))
    w1 = poll_n(p.cq1, 4, "responder")
    for w in w1:
        print(f"# responder: {wc_str(w)}")
    got1 = [(w.wr_id, w.status, w.opcode, w.byte_len, bool(w.wc_flags & e.IBV_WC_WITH_IMM)) for w in w1]
    want1 = [(101, 0, e.IBV_WC_RECV, n, False), (102, 0, e.IBV_WC_RECV, 1, True),
             (103, 0, e.IBV_WC_RECV_RDMA_WITH_IMM, 3000, True), (104, 0, e.IBV_WC_RECV, 0, False)]
    check(got1 == want1, "responder: SEND 64 KiB, SEND+IMM 1 B, WRITE+IMM 3000 B, SEND 0 B in order", str(got1))
    if len(w1) == 4:
        # imm_data is in network byte order in the WC; compare both ways
        imms = [w1[1].imm_data, w1[2].imm_data]
        ok = imms in ([0x11223344, 0x55667788], [0x44332211, 0x88776655])
        check(ok, "responder: immediate data of SEND+IMM and WRITE+IMM", [hex(x) for x in imms])
    check(p.mr1.read(n, 0) == srcs[0], "SEND 64 KiB data intact")
    check(p.mr1.read(1, n) == srcs[1], "SEND with immediate data intact")
    check(p.mr1.read(n, 4 * n) == srcs[2], "RDMA WRITE 64 KiB data intact")
    check(p.mr1.read(3000, 5 * n) == srcs[3], "RDMA WRITE with immediate data intact")
    check(not rclib.drain(p.cq1, 0.3) and not rclib.drain(p.cq0, 0.1), "no further completions")


def case_loss(d0, d1, ifname):
    msg, nmsg, tail = 8192, 150, 20
    total = nmsg + tail
    nrecv = total + 8
    p = UcPair(d0, d1, nrecv * msg, recv_wr=256, send_wr=16)
    p.mr1.write(bytes(nrecv * msg), nrecv * msg, 0)
    for k in range(nrecv):
        p.recv(k, msg, k * msg)

    def run(first, count):
        posted = done = 0
        wcs = []
        dl = time.monotonic() + 4 * POLL_S
        while done < count and time.monotonic() < dl:
            while posted < count and posted - done < 8:
                i = first + posted
                off = (i % 16) * msg
                p.mr0.write(pattern(msg, i & 0xFF), msg, off)
                p.send(i, e.IBV_WR_SEND_WITH_IMM, msg, off, imm=i)
                posted += 1
            got = rclib.poll(p.cq0, 1, time.monotonic() + 5)
            # the source slot may be rewritten only after its send completed
            done += len(got)
            wcs.extend(got)
        return wcs

    ctr = f"/sys/class/infiniband/{d1.name}/ports/1/hw_counters/uc_dropped"

    def dropped():
        try:
            with open(ctr) as f:
                return int(f.read())
        except (OSError, ValueError):
            return None

    before = dropped()
    subprocess.run(["tc", "qdisc", "replace", "dev", ifname, "root", "netem", "loss", "5%"], check=True)
    try:
        w0 = run(0, nmsg)
    finally:
        time.sleep(1)
        subprocess.run(["tc", "qdisc", "del", "dev", ifname, "root"], check=False)
    w0 += run(nmsg, tail)
    check(len(w0) == total and all(w.status == 0 for w in w0) and [w.wr_id for w in w0] == list(range(total)),
          f"requester: all {total} SENDs complete successfully, in order (no ACK needed)",
          "; ".join(wc_str(w) for w in w0 if w.status != 0)[:300] or f"{len(w0)} completions")
    time.sleep(1)
    w1 = rclib.drain(p.cq1, 1.0)
    print(f"# {len(w1)} of {total} messages delivered")
    bad = []
    last = -1
    seen = []
    for k, w in enumerate(w1):
        i = w.imm_data
        if i >= total:
            i = int.from_bytes(i.to_bytes(4, "little"), "big")
        if w.wr_id != k or w.status != 0 or w.byte_len != msg or not w.wc_flags & e.IBV_WC_WITH_IMM:
            bad.append(f"completion {k}: {wc_str(w)}")
            continue
        if i <= last or i >= total:
            bad.append(f"completion {k}: message {i} after {last}")
            continue
        last = i
        seen.append(i)
        if p.mr1.read(msg, k * msg) != pattern(msg, i & 0xFF):
            bad.append(f"completion {k}: data of message {i} differs")
    check(not bad, "responder: receives complete in posting order, each an intact message, in order, once",
          "; ".join(bad[:4]))
    check(len(seen) < nmsg, "some messages were lost under netem loss 5%", f"{len(seen)} delivered")
    check(len(seen) > nmsg // 4, "most messages got through", f"{len(seen)} delivered")
    check(all(i in seen for i in range(nmsg, total)), f"all {tail} messages sent after the loss arrived",
          f"missing {[i for i in range(nmsg, total) if i not in seen]}")
    after = dropped()
    if before is None:
        print(f"# ({d1.name} has no uc_dropped counter: not checked)")
    else:
        check(after > before, f"{d1.name} uc_dropped counted the dropped packets", f"{before} -> {after}")
    st = (rclib.qp_state(p.qp0), rclib.qp_state(p.qp1))
    check(st == (e.IBV_QPS_RTS, e.IBV_QPS_RTS), "both UC QPs still in RTS", str(st))


CASES = {"ops": case_ops, "loss": case_loss}


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "--list":
        print("\n".join(CASES))
        return
    if len(sys.argv) < 6 or sys.argv[5] not in CASES:
        sys.exit(f"usage: {sys.argv[0]} DEV0 GID0 DEV1 GID1 CASE [IF0] (CASE: {', '.join(CASES)})")
    d0 = Dev(sys.argv[1], int(sys.argv[2]))
    d1 = Dev(sys.argv[3], int(sys.argv[4]))
    try:
        if sys.argv[5] == "loss":
            case_loss(d0, d1, sys.argv[6])
        else:
            CASES[sys.argv[5]](d0, d1)
    except PyverbsRDMAError as ex:
        check(False, f"case {sys.argv[5]} ran to the end", f"unexpected verbs error: {ex}")
    finish()


if __name__ == "__main__":
    main()
