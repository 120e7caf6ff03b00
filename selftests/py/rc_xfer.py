#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Data-verified RC transfers between two devices in one process.

Usage: rc_xfer.py DEV0 GID0 DEV1 GID1 [--ops send,write,read] [--total BYTES]
                  [--msg BYTES] [--qps N] [--timeout EXP] [--mtu BYTES]
                  [--depth N] [--start-psn PSN] [--seed N] [--deadline S]
                  [--stall S] [--retry-cnt N] [--set-when-connected FILE=VALUE]

N RC queue-pair pairs are connected directly (DEV0 side: requester, DEV1
side: responder; retry_cnt 7 unless --retry-cnt, rnr_retry 7, max_rd_atomic and
max_dest_rd_atomic 16, path MTU = DEV0's active MTU unless --mtu).  For
each operation in --ops, every QP pair moves --total bytes in --msg byte
messages of fresh random content, all QPs busy at once (up to --depth
messages in flight per QP), and every byte is checked where it lands:

  send       SEND into a posted receive buffer on DEV1
  send_imm   SEND_WITH_IMM: as send, plus the immediate on the receive
  write      RDMA_WRITE into DEV1's buffer
  write_imm  RDMA_WRITE_WITH_IMM: as write, plus a receive completion with
             the immediate and the write length on DEV1
  read       RDMA_READ of DEV1's buffer into DEV0's

--set-when-connected FILE=VALUE writes VALUE to FILE once every QP is in
RTS, before the first message: a test turns a fault on (failslab's
probability) for the data path only, not for the setup, whose verbs may
fail under it by design.

Every completion is checked: status SUCCESS, opcode, QP number, wr_id in
posting order, byte_len (receives and READs, where the verbs define it),
immediate data and the IBV_WC_WITH_IMM flag.  Exactly one completion per
work request must arrive: a poll loop with a wall-clock deadline catches
lost ones, a final drain extra ones.  Prints one summary line per operation
(bytes, seconds, MB/s); exits 1 at the first mismatch (with details), 0 if
everything arrived intact.
"""
import argparse
import collections
import os
import random
import sys
import time

import pyverbs.enums as e
from pyverbs.wr import SGE, RecvWR, SendWR

import rclib
from rclib import Dev, status_str, opcode_str, wc_str

# name: (send opcode, requester wc opcode, receive wc opcode or None, data on DEV0 -> DEV1?)
OPS = {
    "send": (e.IBV_WR_SEND, e.IBV_WC_SEND, e.IBV_WC_RECV, True),
    "send_imm": (e.IBV_WR_SEND_WITH_IMM, e.IBV_WC_SEND, e.IBV_WC_RECV, True),
    "write": (e.IBV_WR_RDMA_WRITE, e.IBV_WC_RDMA_WRITE, None, True),
    "write_imm": (e.IBV_WR_RDMA_WRITE_WITH_IMM, e.IBV_WC_RDMA_WRITE, e.IBV_WC_RECV_RDMA_WITH_IMM, True),
    "read": (e.IBV_WR_RDMA_READ, e.IBV_WC_RDMA_READ, None, False),
}


class Fail(Exception):
    pass


def size(s):
    """A byte count: 4096, 64K, 1M, 64MiB."""
    s = s.strip().upper().replace("IB", "").replace("B", "")
    mult = 1
    if s and s[-1] in "KMG":
        mult = 1 << (10 * ("KMG".index(s[-1]) + 1))
        s = s[:-1]
    return int(s, 0) * mult


class Msg:
    __slots__ = ("seq", "slot", "data", "imm", "send_done", "recv_done")

    def __init__(self, seq, slot, data, imm):
        self.seq, self.slot, self.data, self.imm = seq, slot, data, imm
        self.send_done = False
        self.recv_done = False


class Lane:
    """One QP pair with its buffers (depth slots of msg bytes on each side)."""

    def __init__(self, idx, d0, d1, cq0, cq1, depth, msg, mtu, args, rng):
        self.idx = idx
        self.qp0 = d0.qp(cq0, cq0, send_wr=depth, recv_wr=1)
        self.qp1 = d1.qp(cq1, cq1, send_wr=1, recv_wr=depth)
        self.mr0 = d0.mr(depth * msg)
        self.mr1 = d1.mr(depth * msg)
        if args.start_psn is not None:
            self.psn0 = self.psn1 = args.start_psn & 0xFFFFFF
        else:
            self.psn0, self.psn1 = rng.randrange(1 << 24), rng.randrange(1 << 24)
        rclib.connect(d0, self.qp0, self.psn0, d1, self.qp1, self.psn1, mtu, timeout=args.timeout,
                      retry_cnt=args.retry_cnt)
        self.depth = depth

    def reset(self):
        self.free = collections.deque(range(self.depth))
        self.started = 0
        self.done = 0
        self.sends = collections.deque()  # Msgs in posting order, awaiting the requester completion
        self.recvs = collections.deque()  # Msgs in posting order, awaiting the receive completion
        self.inflight = {}


class Xfer:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.d0 = Dev(args.dev0, args.gid0)
        self.d1 = Dev(args.dev1, args.gid1)
        if args.mtu:
            if args.mtu not in rclib.MTU_ENUM:
                raise SystemExit(f"--mtu must be one of {sorted(rclib.MTU_ENUM)}")
            self.mtu = rclib.MTU_ENUM[args.mtu]
        else:
            self.mtu = self.d0.active_mtu()
        self.msgs = max(1, args.total // args.msg)
        if self.msgs * args.msg != args.total:
            raise SystemExit("--total must be a multiple of --msg")
        depth = args.depth or max(1, min(16, (64 << 20) // (args.msg * args.qps)))
        self.depth = min(depth, self.msgs)
        ncqe = args.qps * self.depth + 16
        self.cq0 = self.d0.cq(ncqe)
        self.cq1 = self.d1.cq(ncqe)
        self.lanes = [Lane(i, self.d0, self.d1, self.cq0, self.cq1, self.depth, args.msg, self.mtu, args, self.rng)
                      for i in range(args.qps)]
        self.by_qpn0 = {ln.qp0.qp_num: ln for ln in self.lanes}
        self.by_qpn1 = {ln.qp1.qp_num: ln for ln in self.lanes}
        psns = (f"PSNs {self.lanes[0].psn0:#08x}/{self.lanes[0].psn1:#08x}" if args.qps == 1
                else f"start PSN {args.start_psn:#08x}" if args.start_psn is not None else "random PSNs")
        print(f"# {args.dev0}[gid {args.gid0}] -> {args.dev1}[gid {args.gid1}]: {args.qps} QP pair(s), "
              f"path MTU {rclib.MTU_BYTES.get(self.mtu, self.mtu)}, {self.msgs} x {args.msg} B per QP, "
              f"depth {self.depth}, timeout {args.timeout}, {psns}, seed {args.seed}", flush=True)

    # ------------------------------------------------------------------
    def fail(self, what):
        raise Fail(what)

    def post(self, ln, op):
        opc, _, rwc, fwd = OPS[op]
        msg = self.args.msg
        while ln.free and ln.started < self.msgs:
            slot = ln.free.popleft()
            seq = ln.started
            ln.started += 1
            off = slot * msg
            data = self.rng.randbytes(msg)
            imm = self.rng.getrandbits(32) if op.endswith("_imm") else None
            m = Msg(seq, slot, data, imm)
            wr_id = (ln.idx << 40) | (seq << 8) | slot
            if fwd:
                ln.mr0.write(data, msg, off)
            else:
                ln.mr1.write(data, msg, off)
            if rwc is not None:
                # (WRITE_WITH_IMM puts nothing in the receive buffer, but
                # pyverbs wants one SGE.)
                rwr = RecvWR(wr_id=wr_id, num_sge=1, sg=[SGE(ln.mr1.buf + off, msg, ln.mr1.lkey)])
                ln.qp1.post_recv(rwr)
                ln.recvs.append(m)
            else:
                m.recv_done = True
            # WRITE: DEV0 slot -> DEV1 slot; READ: DEV1 slot -> DEV0 slot.
            sge = SGE(ln.mr0.buf + off, msg, ln.mr0.lkey)
            raddr, rkey = ln.mr1.buf + off, ln.mr1.rkey
            wr = SendWR(wr_id=wr_id, opcode=opc, num_sge=1, sg=[sge], send_flags=e.IBV_SEND_SIGNALED)
            if imm is not None:
                wr.imm_data = imm
            if opc != e.IBV_WR_SEND and opc != e.IBV_WR_SEND_WITH_IMM:
                wr.set_wr_rdma(rkey, raddr)
            ln.qp0.post_send(wr)
            ln.sends.append(m)
            ln.inflight[seq] = m

    def check_wc(self, ln, wc, q, want_op, side):
        if not q:
            self.fail(f"QP pair {ln.idx}: unexpected {side} completion (none outstanding): {wc_str(wc)}")
        m = q[0]
        want_id = (ln.idx << 40) | (m.seq << 8) | m.slot
        if wc.status != e.IBV_WC_SUCCESS:
            self.fail(f"QP pair {ln.idx}: {side} completion of message {m.seq} has status "
                      f"{status_str(wc.status)}: {wc_str(wc)}")
        if wc.wr_id != want_id:
            self.fail(f"QP pair {ln.idx}: {side} completion out of order or foreign: wr_id {wc.wr_id:#x}, "
                      f"want {want_id:#x} (message {m.seq}): {wc_str(wc)}")
        if wc.opcode != want_op:
            self.fail(f"QP pair {ln.idx}: {side} completion opcode {opcode_str(wc.opcode)}, want "
                      f"{opcode_str(want_op)}: {wc_str(wc)}")
        q.popleft()
        return m

    def complete(self, ln, m, op):
        if not (m.send_done and m.recv_done):
            return
        msg = self.args.msg
        off = m.slot * msg
        fwd = OPS[op][3]
        got = (ln.mr1 if fwd else ln.mr0).read(msg, off)
        if got != m.data:
            at, n = rclib.first_diff(got, m.data)
            where = f"{self.args.dev1} buffer" if fwd else f"{self.args.dev0} buffer"
            self.fail(f"QP pair {ln.idx}: {op} message {m.seq} ({msg} B, slot {m.slot}): data in the {where} "
                      f"differs: {n} bytes, first at offset {at} (packet {at // rclib.MTU_BYTES.get(self.mtu, 1)}): "
                      f"got {got[at:at + 8].hex()} want {m.data[at:at + 8].hex()}")
        del ln.inflight[m.seq]
        ln.free.append(m.slot)
        ln.done += 1

    def on_req(self, wc, op):
        ln = self.by_qpn0.get(wc.qp_num)
        if ln is None:
            self.fail(f"requester completion for an unknown QP: {wc_str(wc)}")
        m = self.check_wc(ln, wc, ln.sends, OPS[op][1], "requester")
        if op == "read" and wc.byte_len != self.args.msg:
            self.fail(f"QP pair {ln.idx}: READ completion byte_len {wc.byte_len}, want {self.args.msg}")
        m.send_done = True
        self.complete(ln, m, op)

    def on_recv(self, wc, op):
        ln = self.by_qpn1.get(wc.qp_num)
        if ln is None:
            self.fail(f"responder completion for an unknown QP: {wc_str(wc)}")
        rwc = OPS[op][2]
        if rwc is None:
            self.fail(f"QP pair {ln.idx}: receive completion during {op}: {wc_str(wc)}")
        m = self.check_wc(ln, wc, ln.recvs, rwc, "receive")
        if wc.byte_len != self.args.msg:
            self.fail(f"QP pair {ln.idx}: receive completion byte_len {wc.byte_len}, want {self.args.msg}: "
                      f"{wc_str(wc)}")
        has_imm = bool(wc.wc_flags & e.IBV_WC_WITH_IMM)
        if m.imm is not None:
            if not has_imm:
                self.fail(f"QP pair {ln.idx}: receive completion without IBV_WC_WITH_IMM: {wc_str(wc)}")
            if wc.imm_data != m.imm:
                self.fail(f"QP pair {ln.idx}: imm_data {wc.imm_data:#010x}, want {m.imm:#010x}: {wc_str(wc)}")
        elif has_imm:
            self.fail(f"QP pair {ln.idx}: IBV_WC_WITH_IMM set on a plain receive: {wc_str(wc)}")
        m.recv_done = True
        self.complete(ln, m, op)

    def stall_report(self):
        lines = []
        for ln in self.lanes:
            if ln.done < self.msgs:
                st0 = rclib.state_str(rclib.qp_state(ln.qp0))
                st1 = rclib.state_str(rclib.qp_state(ln.qp1))
                lines.append(f"QP pair {ln.idx} (qpn {ln.qp0.qp_num}->{ln.qp1.qp_num}, {st0}/{st1}): "
                             f"{ln.done}/{self.msgs} done, {len(ln.sends)} requester and {len(ln.recvs)} "
                             f"receive completions outstanding")
        return lines

    def run_op(self, op):
        args = self.args
        for ln in self.lanes:
            ln.reset()
        total = self.msgs * args.qps
        t0 = time.monotonic()
        deadline = t0 + args.deadline
        last = t0
        done = 0
        while done < total:
            for ln in self.lanes:
                self.post(ln, op)
            progressed = False
            for cq, fn in ((self.cq0, self.on_req), (self.cq1, self.on_recv)):
                while True:
                    n, wcs = cq.poll(64)
                    if not n:
                        break
                    progressed = True
                    for wc in wcs[:n]:
                        fn(wc, op)
            done = sum(ln.done for ln in self.lanes)
            now = time.monotonic()
            if progressed:
                last = now
            if now > deadline or now - last > args.stall:
                why = (f"deadline of {args.deadline} s passed" if now > deadline
                       else f"no completion for {args.stall} s")
                rep = "; ".join(self.stall_report()[:8])
                self.fail(f"{op}: {why} with {done}/{total} messages complete (lost completions?): {rep}")
            if not progressed:
                time.sleep(0.0005)
        secs = time.monotonic() - t0
        # No extra completions may follow.
        for cq, side in ((self.cq0, "requester"), (self.cq1, "receive")):
            extra = rclib.drain(cq)
            if extra:
                self.fail(f"{op}: {len(extra)} extra {side} completion(s) after all expected ones: "
                          + "; ".join(wc_str(w) for w in extra[:4]))
        nbytes = total * args.msg
        print(f"{op}: {nbytes} bytes ({args.qps} QP x {self.msgs} x {args.msg} B) in {secs:.2f} s = "
              f"{nbytes / secs / 1e6:.2f} MB/s, all data verified", flush=True)
        return secs


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("dev0")
    p.add_argument("gid0", type=int)
    p.add_argument("dev1")
    p.add_argument("gid1", type=int)
    p.add_argument("--ops", default="send,write,read")
    p.add_argument("--total", type=size, default=size("16M"), help="bytes per QP and operation")
    p.add_argument("--msg", type=size, default=size("1M"), help="message size")
    p.add_argument("--qps", type=int, default=1)
    p.add_argument("--timeout", type=int, default=14, help="local ACK timeout exponent")
    p.add_argument("--retry-cnt", type=int, default=7, help="retry_cnt of the QPs (7: never runs out)")
    p.add_argument("--mtu", type=int, default=0, help="path MTU in bytes (default: the active MTU)")
    p.add_argument("--depth", type=int, default=0, help="messages in flight per QP")
    p.add_argument("--start-psn", type=lambda s: int(s, 0), default=None, help="initial PSN of every QP")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--deadline", type=float, default=600, help="seconds allowed per operation")
    p.add_argument("--stall", type=float, default=120, help="seconds without any completion that fail")
    p.add_argument("--set-when-connected", metavar="FILE=VALUE", default=None,
                   help="write VALUE to FILE once all QPs are in RTS, before the first message")
    p.add_argument("--until", metavar="FILE", default=None,
                   help="repeat the whole transfer (new device contexts, QPs and MRs each run) until FILE "
                        "exists; prints 'run N ok' or 'run N FAIL: why' per finished run, exits 1 if any failed")
    p.add_argument("--pause", type=float, default=0, help="with --until: seconds between runs")
    args = p.parse_args()
    if args.seed is None:
        args.seed = random.randrange(1 << 32)
    ops = [o for o in args.ops.split(",") if o]
    for o in ops:
        if o not in OPS:
            p.error(f"unknown op {o} (known: {', '.join(OPS)})")
    if args.msg <= 0 or args.qps <= 0:
        p.error("--msg and --qps must be positive")
    if not 0 <= args.retry_cnt <= 7:
        p.error("--retry-cnt must be 0..7")
    if not 0 <= args.depth < 256:
        p.error("--depth must be below 256")
    set_file = set_value = None
    if args.set_when_connected is not None:
        set_file, sep, set_value = args.set_when_connected.partition("=")
        if not sep or not set_file:
            p.error("--set-when-connected needs FILE=VALUE")

    def transfer():
        """One whole transfer: new contexts, QPs and MRs, every op."""
        x = Xfer(args)
        if set_file is not None:
            with open(set_file, "w") as f:
                f.write(set_value + "\n")
        for op in ops:
            x.run_op(op)

    if args.until is not None:
        # One process doing what a loop of rc_xfer.py runs would (a Python
        # start with pyverbs costs seconds of CPU in the debug VM under TCG).
        if set_file is not None:
            p.error("--set-when-connected does not go with --until")
        n = failed = 0
        while not os.path.exists(args.until):
            n += 1
            try:
                transfer()
                print(f"run {n} ok", flush=True)
            except Fail as ex:
                failed += 1
                print(f"run {n} FAIL: {ex}", flush=True)
            args.seed = random.randrange(1 << 32)
            time.sleep(args.pause)
        sys.exit(1 if failed else 0)
    try:
        transfer()
    except Fail as ex:
        print(f"FAIL: {ex}", flush=True)
        sys.exit(1)
    sys.exit(0)


if __name__ == "__main__":
    main()
