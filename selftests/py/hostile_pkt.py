#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Hostile RoCEv2 packets against live queue pairs.

Usage: hostile_pkt.py DEV0 GID0 DEV1 GID1 [--flood N] [--procs N]
                      [--settle S] [--seed N]

DEV0 (rroce0, 10.77.0.1 / fd77::1, init_net) and DEV1 (rroce1,
10.77.0.2 / fd77::2, netns peer) are opened in one process.  A live RC pair
A (DEV0 requester qa0, DEV1 responder qa1), a UD QP on each device, RC QPs
left in RESET and INIT, an MR of another PD and the R_Key of a deregistered
MR are set up; every QPN, PSN, R_Key and VA is known here, so forged packets
hit them exactly.  Packets are plain UDP datagrams to port 4791 (the kernel
builds the IP and UDP headers, which this script predicts to compute a
correct ICRC with icrc_check.icrc(), validated against known answers):
from 10.77.0.1 / fd77::1 over the veth to DEV1, and to 10.77.0.1 itself
(loopback) to reach DEV0.

Each class of packets is sent, then the hw_counters deltas of both devices
must be exactly what the class must cause (drops, ICRC errors, sequence
NAKs, duplicates, ignored responses, NAKs sent), the QPs must be in the
state IBA prescribes, and the responder's memory must be untouched.
Attacks that are valid-looking and in sequence (bad R_Key, out-of-bounds
RETH, misaligned atomic, oversized payload...) legitimately NAK and move the
responder QP to the error state: each gets its own victim QP pair.
Everything else must leave pair A working: afterwards SEND, WRITE and READ
on pair A, a fresh RC pair and a UD datagram move data that is checked byte
for byte.  A flood of --flood mixed packets (from --procs processes) ends
the attacks.  Prints TAP lines (ok / not ok) and per-class packet counts.
"""
import argparse
import errno
import ctypes
import os
import random
import socket
import struct
import sys
import time
import zlib

import pyverbs.enums as e
from pyverbs.addr import AH
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.wr import SGE, RecvWR, SendWR

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import icrc_check  # noqa: E402
import rclib  # noqa: E402
from rclib import Dev, wc_str, state_str  # noqa: E402
from taplib import check, finish  # noqa: E402

ROCE = 4791
CLONE_NEWNET = 0x40000000
IP0, IP1, IP6_0, IP6_1 = "10.77.0.1", "10.77.0.2", "fd77::1", "fd77::2"
SPORT = 49999
PKEY = 0xFFFF
GSI_QKEY = 0x80010000
UD_QKEY = 0x1234567

# opcodes
SEND_FIRST, SEND_MIDDLE, SEND_LAST, SEND_ONLY = 0x00, 0x01, 0x02, 0x04
WRITE_FIRST, WRITE_ONLY = 0x06, 0x0A
READ_REQ = 0x0C
READ_RESP_FIRST, READ_RESP_LAST, READ_RESP_ONLY = 0x0D, 0x0F, 0x10
ACK, ATOMIC_ACK, CMP_SWAP, FETCH_ADD = 0x11, 0x12, 0x13, 0x14
FLUSH = 0x1C  # IBTA 1.5: FETH + RETH, no payload
ATOMIC_WRITE = 0x1D  # IBTA 1.5: RETH + 8 bytes
# FLUSH placement types and selectivity levels; the access flags and device
# capability bits of FLUSH (libibverbs 44's headers do not name them)
FLUSH_GLOBAL, FLUSH_PERSISTENT, FLUSH_RANGE, FLUSH_MR = 1, 2, 0, 1
ACCESS_FLUSH_GLOBAL, ACCESS_FLUSH_PERSISTENT = 1 << 8, 1 << 9
DEVICE_FLUSH_GLOBAL, DEVICE_FLUSH_PERSISTENT = 1 << 38, 1 << 39
UD_SEND_ONLY = 0x64

COUNTERS = ["rx_packets", "tx_packets", "rx_dropped", "rx_icrc_errors", "out_of_sequence",
            "duplicate_requests", "seq_naks_rcvd", "completion_errors", "ignored_responses",
            "access_naks_sent", "invalid_naks_sent", "retransmits", "resp_backpressure"]


# ------------------------------------------------------------------ packets
def bth(op, qpn, psn, se=0, mig=0, pad=0, tver=0, pkey=PKEY, ackreq=0, resv8=0, resv7=0):
    return struct.pack("!BBHII", op, (se << 7) | (mig << 6) | ((pad & 3) << 4) | (tver & 0xF), pkey,
                       ((resv8 & 0xFF) << 24) | (qpn & 0xFFFFFF), (ackreq << 31) | ((resv7 & 0x7F) << 24) |
                       (psn & 0xFFFFFF))


def reth(va, rkey, length):
    return struct.pack("!QII", va & (2**64 - 1), rkey & 0xFFFFFFFF, length & 0xFFFFFFFF)


def feth(placement, level=FLUSH_RANGE):
    return struct.pack("!I", (placement & 0xF) | ((level & 3) << 4))


def aeth(syn, msn):
    return struct.pack("!I", ((syn & 0xFF) << 24) | (msn & 0xFFFFFF))


def atomiceth(va, rkey, swap, cmp=0):
    return struct.pack("!QIQQ", va & (2**64 - 1), rkey, swap, cmp)


def deth(qkey, src):
    return struct.pack("!II", qkey, src & 0xFFFFFF)


def udp_socket(v6, addr, netns=None):
    """A UDP socket bound to (addr, SPORT), created in network namespace
    `netns` (a name under /run/netns) if given: sockets keep the namespace
    they were created in."""
    fam = socket.AF_INET6 if v6 else socket.AF_INET
    if netns:
        libc = ctypes.CDLL(None, use_errno=True)
        with open("/proc/self/ns/net") as cur, open(f"/run/netns/{netns}") as tgt:
            if libc.setns(tgt.fileno(), CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), f"setns({netns})")
            try:
                s = socket.socket(fam, socket.SOCK_DGRAM)
            finally:
                if libc.setns(cur.fileno(), CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), "setns back")
    else:
        s = socket.socket(fam, socket.SOCK_DGRAM)
    s.bind((addr, SPORT))
    # DF always (IPv4: the ID is then 0 on an unconnected socket, and the
    # ICRC covers it); IP(V6)_MTU_DISCOVER = IP_PMTUDISC_DO.
    if v6:
        s.setsockopt(socket.IPPROTO_IPV6, 23, 2)
    else:
        s.setsockopt(socket.IPPROTO_IP, 10, 2)
    return s


class Wire:
    """Sends UDP payloads (BTH ... ICRC) to DEV1 (from IP0 / IP6_0 over the
    veth) or to DEV0 (from IP1 / IP6_1, a socket in DEV1's namespace, the
    other way over the veth: from the QPs' peer address), with the ICRC
    computed over the IP/UDP headers the kernel will build (or
    deliberately wrong)."""

    def __init__(self, peer_ns):
        # (to, v6) -> socket
        self.socks = {(1, False): udp_socket(False, IP0), (1, True): udp_socket(True, IP6_0),
                      (0, False): udp_socket(False, IP1, peer_ns), (0, True): udp_socket(True, IP6_1, peer_ns)}
        self.s4, self.s6 = self.socks[(1, False)], self.socks[(1, True)]
        self.sent = 0

    @staticmethod
    def icrc(src, dst, roce_no_icrc, v6, opts=b""):
        ulen = 8 + len(roce_no_icrc) + 4
        udp = struct.pack("!HHHH", SPORT, ROCE, ulen, 0)
        if v6:
            ip = struct.pack("!IHBB", 6 << 28, ulen, 17, 64) + socket.inet_pton(socket.AF_INET6, src) + \
                socket.inet_pton(socket.AF_INET6, dst)
        else:
            ihl = 5 + len(opts) // 4
            ip = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, 0, ihl * 4 + ulen, 0, 0x4000, 64, 17, 0,
                             socket.inet_aton(src), socket.inet_aton(dst)) + opts
        return icrc_check.icrc(ip + udp + roce_no_icrc + b"\0\0\0\0")

    def packet(self, roce, to=1, v6=False, good_icrc=True, opts=b""):
        """roce: the UDP payload without ICRC; returns the full payload."""
        a, b = (IP6_0, IP6_1) if v6 else (IP0, IP1)
        src, dst = (a, b) if to == 1 else (b, a)
        c = self.icrc(src, dst, roce, v6, opts)
        if not good_icrc:
            c ^= 0x5A5A0001
        return roce + struct.pack("<I", c)

    def send_raw(self, payload, to=1, v6=False):
        a, b = (IP6_0, IP6_1) if v6 else (IP0, IP1)
        self.socks[(to, v6)].sendto(payload, (b if to == 1 else a, ROCE))
        self.sent += 1

    def send(self, roce, to=1, v6=False, good_icrc=True):
        self.send_raw(self.packet(roce, to, v6, good_icrc), to, v6)


# ----------------------------------------------------------------- counters
def lo(want):
    """The least value a wanted delta (a number or a (lo, hi) range) allows."""
    return want[0] if isinstance(want, tuple) else want


def read_counters(dev):
    d = f"/sys/class/infiniband/{dev}/ports/1/hw_counters"
    out = {}
    for n in COUNTERS:
        try:
            with open(f"{d}/{n}") as f:
                out[n] = int(f.read())
        except OSError:
            out[n] = None
    return out


def softnet_drops():
    n = 0
    with open("/proc/net/softnet_stat") as f:
        for line in f:
            n += int(line.split()[1], 16)
    return n


class Hostile:
    def __init__(self, a):
        self.a = a
        self.v6 = a.v6
        self.rng = random.Random(a.seed)
        self.scale = float(os.environ.get("RROCE_TIMEOUT_SCALE", "1") or 1)
        self.d0 = Dev(a.dev0, a.gid0)
        self.d1 = Dev(a.dev1, a.gid1)
        self.mtu = self.d0.active_mtu()
        self.pmtu = rclib.MTU_BYTES[self.mtu]
        self.cq0 = self.d0.cq(256)
        self.cq1 = self.d1.cq(256)
        self.w = Wire(a.peer_ns)
        self.classes = []  # (name, packets)
        # pair A
        self.qa0 = self.d0.qp(self.cq0, self.cq0, send_wr=64, recv_wr=64)
        self.qa1 = self.d1.qp(self.cq1, self.cq1, send_wr=64, recv_wr=64)
        self.psn0 = self.rng.randrange(1 << 24)  # qa0 -> qa1 (qa1's ePSN)
        self.psn1 = self.rng.randrange(1 << 24)
        rclib.connect(self.d0, self.qa0, self.psn0, self.d1, self.qa1, self.psn1, self.mtu, timeout=a.timeout)
        self.next0 = self.psn0  # next PSN qa0 sends = ePSN of qa1
        self.mr0 = self.d0.mr(1 << 16)
        self.mr1 = self.d1.mr(1 << 16)
        self.pattern1 = self.rng.randbytes(1 << 16)
        self.mr1.write(self.pattern1, len(self.pattern1), 0)
        # other targets on DEV1
        self.ud1 = self.d1.qp(self.cq1, self.cq1, qp_type=e.IBV_QPT_UD)
        self.ud_up(self.ud1)
        self.ud0 = self.d0.qp(self.cq0, self.cq0, qp_type=e.IBV_QPT_UD)
        self.ud_up(self.ud0)
        self.reset_qp = self.d1.qp(self.cq1, self.cq1)
        self.init_qp = self.d1.qp(self.cq1, self.cq1)
        rclib.to_init(self.init_qp)
        self.pd2 = PD(self.d1.ctx)
        self.mr_other_pd = MR(self.pd2, 4096, rclib.ALL_ACCESS)
        dead = self.d1.mr(4096)
        self.dead_rkey, self.dead_va = dead.rkey, dead.buf
        dead.close()
        print(f"# IPv{6 if self.v6 else 4}: {a.dev0}[gid {a.gid0}] <-> {a.dev1}[gid {a.gid1}], path MTU {self.pmtu}; pair A: "
              f"qpn {self.qa0.qp_num} -> {self.qa1.qp_num}, ePSN {self.psn0:#x}; UD qpn {self.ud1.qp_num}; "
              f"RESET qpn {self.reset_qp.qp_num}, INIT qpn {self.init_qp.qp_num}; MR rkey {self.mr1.rkey:#x} "
              f"va {self.mr1.buf:#x}; other-PD rkey {self.mr_other_pd.rkey:#x}; dead rkey {self.dead_rkey:#x}",
              flush=True)

    def ud_up(self, qp):
        qp.modify(rclib.qp_attr(e.IBV_QPS_INIT, port_num=1, pkey_index=0, qkey=UD_QKEY),
                  e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_QKEY)
        qp.modify(rclib.qp_attr(e.IBV_QPS_RTR), e.IBV_QP_STATE)
        qp.modify(rclib.qp_attr(e.IBV_QPS_RTS, sq_psn=0), e.IBV_QP_STATE | e.IBV_QP_SQ_PSN)

    # -------------------------------------------------------------- helpers
    def snap(self):
        return read_counters(self.a.dev0), read_counters(self.a.dev1)

    def delta(self, before):
        after = self.snap()
        return tuple({k: (a[k] - b[k]) if a[k] is not None and b[k] is not None else None for k in a}
                     for a, b in zip(after, before))

    def wait_counters(self, before, want0, want1, tmo=3.0):
        """Poll until the deltas reach (at least) the wanted values, then
        let late effects settle; returns the final deltas."""
        end = time.monotonic() + tmo * self.scale
        while True:
            d0, d1 = self.delta(before)
            done = all((d0.get(k) or 0) >= lo(v) for k, v in want0.items()) and \
                all((d1.get(k) or 0) >= lo(v) for k, v in want1.items())
            if done or time.monotonic() > end:
                break
            time.sleep(0.02)
        time.sleep(0.08 * self.scale)
        return self.delta(before)

    def expect(self, name, before, want0, want1, exact=True):
        """want0/want1: counter -> exact delta on DEV0/DEV1, or a (lo, hi)
        range; counters not named must not move except rx_packets/tx_packets
        (checked only if named) and the ones listed in the wants."""
        d0, d1 = self.wait_counters(before, want0, want1)
        bad = []
        for dev, d, want in ((self.a.dev0, d0, want0), (self.a.dev1, d1, want1)):
            for k in COUNTERS:
                got = d[k]
                if k in want:
                    w = want[k]
                    if isinstance(w, tuple):
                        if got is None or not w[0] <= got <= w[1]:
                            bad.append(f"{dev} {k} +{got}, want +{w[0]} .. +{w[1]}")
                    elif got is None or (got != w if exact else got < w):
                        bad.append(f"{dev} {k} +{got}, want {'' if exact else '>= '}+{w}")
                elif k not in ("rx_packets", "tx_packets") and got:
                    bad.append(f"{dev} {k} +{got}, want +0")
        shown = lambda d: " ".join(f"{k} +{v}" for k, v in d.items() if v) or "none"
        print(f"#   {self.a.dev0}: {shown(d0)}; {self.a.dev1}: {shown(d1)}")
        check(not bad, f"{name}: counters", "; ".join(bad))
        return d0, d1

    def expect_acked(self, name, before, n, nack=None):
        """n duplicate requests to the responder of pair A, of which nack
        (default all) are SEND/WRITEs due an ACK.  Plain ACKs leave once per
        receive batch, so duplicates that arrive in one batch share one: the
        responder sends 1 .. nack ACKs, and the requester ignores exactly as
        many as were sent."""
        nack = n if nack is None else nack
        d0, d1 = self.expect(name, before, {"ignored_responses": (1, nack), "rx_packets": (1, nack)},
                             {"duplicate_requests": n, "rx_packets": n, "tx_packets": (1, nack)})
        acks = d1["tx_packets"]
        check(d0["ignored_responses"] == acks and d0["rx_packets"] == acks,
              f"{name}: the requester got and ignored every ACK sent ({acks} for {nack} duplicates)",
              f"rx_packets +{d0['rx_packets']} ignored_responses +{d0['ignored_responses']}")

    def cls(self, name, n4, n6=None):
        """Record a class of n4 IPv4 and n6 IPv6 packets (n6 None: n4
        packets of this run's family)."""
        if n6 is None:
            n4, n6 = (0, n4) if self.v6 else (n4, 0)
        self.classes.append((name, n4, n6))
        print(f"# class {name}: {n4 + n6} packets injected ({n4} IPv4, {n6} IPv6)", flush=True)

    def state_is(self, qp, want, what):
        st = rclib.qp_state(qp)
        check(st == want, f"{what}: QP {qp.qp_num} {state_str(want)}", f"state {state_str(st)}")

    def mem_untouched(self, what, mr=None, pattern=None):
        mr = mr or self.mr1
        pattern = pattern or self.pattern1
        got = mr.read(len(pattern), 0)
        at, n = rclib.first_diff(got, pattern)
        check(at < 0, f"{what}: responder memory untouched", f"{n} bytes differ, first at {at}")

    def no_cqe(self, what):
        extra = rclib.drain(self.cq0, 0.05) + rclib.drain(self.cq1, 0.02)
        check(not extra, f"{what}: no completions", "; ".join(wc_str(w) for w in extra[:4]))

    # ------------------------------------------------------- packet makers
    def valid_write(self, psn, qpn=None, n=64):
        """WRITE_ONLY of n bytes into the start of mr1: executes if it gets
        through at the ePSN."""
        return bth(WRITE_ONLY, self.qa1.qp_num if qpn is None else qpn, psn, ackreq=1) + reth(self.mr1.buf, self.mr1.rkey, n) + \
            bytes([0xEE]) * n

    def malformed(self):
        """(description, roce payload without ICRC, add ICRC?) tuples that
        the parser must refuse; all aimed at pair A's responder at its
        ePSN, so that a lenient parser would execute them."""
        q, p, r = self.qa1.qp_num, self.next0, self.mr1
        full = self.valid_write(p)
        out = []
        for n in (0, 1, 4, 8, 11):
            out.append((f"{n} bytes (short of BTH)", full[:n], False))
        out.append(("BTH, no ICRC", full[:12], False))
        out.append(("BTH + 2 bytes (short of BTH + ICRC)", full[:12] + b"\0\0", False))
        out.append(("WRITE_ONLY short of RETH", bth(WRITE_ONLY, q, p) + reth(r.buf, r.rkey, 0)[:8], True))
        out.append(("READ_REQ short of RETH", bth(READ_REQ, q, p) + reth(r.buf, r.rkey, 8)[:12], True))
        out.append(("FETCH_ADD short of AtomicETH", bth(FETCH_ADD, q, p) + atomiceth(r.buf, r.rkey, 1)[:20], True))
        out.append(("ACK short of AETH", bth(ACK, self.qa0.qp_num, p), True))  # to DEV1 anyway: parse first
        out.append(("UD SEND short of DETH", bth(UD_SEND_ONLY, self.ud1.qp_num, 0) + deth(UD_QKEY, 1)[:4], True))
        out.append(("length not a multiple of 4", bth(SEND_ONLY, q, p) + b"abc", True))
        out.append(("TVer 1", bth(WRITE_ONLY, q, p, tver=1) + full[12:], True))
        out.append(("TVer 15", bth(WRITE_ONLY, q, p, tver=15) + full[12:], True))
        for op in (0x15, 0x18, 0x1F, 0x3F, 0x5F, 0x7F, 0xA0, 0xC0, 0xFF):
            out.append((f"unknown opcode {op:#04x}", bth(op, q, p) + full[12:], True))
        out.append(("pad count > data", bth(SEND_ONLY, q, p, pad=3), True))
        out.append(("pad on SEND_FIRST", bth(SEND_FIRST, q, p, pad=2) + b"\0" * self.pmtu, True))
        out.append(("payload on READ request", bth(READ_REQ, q, p) + reth(r.buf, r.rkey, 8) + b"\0" * 8, True))
        out.append(("payload on ACK", bth(ACK, self.qa0.qp_num, p) + aeth(0, 0) + b"\0" * 4, True))
        out.append(("P_Key 0x1234", bth(WRITE_ONLY, q, p, pkey=0x1234, ackreq=1) + full[12:], True))
        return out

    # --------------------------------------------------------------- classes
    def run_malformed(self):
        lst = self.malformed()
        b = self.snap()
        n4 = n6 = 0
        for desc, roce, with_icrc in lst:
            for v6 in (False, True):
                payload = self.w.packet(roce, 1, v6) if with_icrc else roce
                self.w.send_raw(payload, 1, v6)
                if v6:
                    n6 += 1
                else:
                    n4 += 1
        self.cls("malformed/truncated/bad version, opcode, pad, P_Key", n4, n6)
        self.expect("malformed", b, {}, {"rx_dropped": n4 + n6, "rx_packets": 0})
        self.mem_untouched("malformed")
        self.state_is(self.qa1, e.IBV_QPS_RTS, "malformed")

    def run_bad_icrc(self):
        b = self.snap()
        n = 0
        for v6 in (self.v6,):
            for k in range(20):
                self.w.send(self.valid_write(self.next0), 1, v6, good_icrc=False)
                n += 1
            self.w.send(bth(SEND_ONLY, self.qa1.qp_num, self.next0) + b"x" * 16, 1, v6, good_icrc=False)
            n += 1
        # to the requester too: an ACK that would complete nothing anyway
        for k in range(10):
            self.w.send(bth(ACK, self.qa0.qp_num, self.next0 - 1) + aeth(0x1F, 0), 0, self.v6, good_icrc=False)
        self.cls("wrong ICRC (in-sequence WRITE/SEND to the responder, ACK to the requester)", n + 10)
        self.expect("wrong ICRC", b, {"rx_icrc_errors": 10, "rx_packets": 0},
                    {"rx_icrc_errors": n, "rx_packets": 0})
        self.mem_untouched("wrong ICRC")

    def run_wrong_qpn(self):
        q = self.qa1.qp_num
        targets = [("nonexistent QPN 0xFFFFFE", 0xFFFFFE), ("nonexistent QPN 0x123456", 0x123456),
                   ("QPN 0", 0), ("RC opcode to the UD QP", self.ud1.qp_num), ("RC opcode to QP1", 1),
                   ("QP in RESET", self.reset_qp.qp_num), ("QP in INIT", self.init_qp.qp_num)]
        b = self.snap()
        n = 0
        for desc, qpn in targets:
            for v6 in (self.v6,):
                for psn in (0, self.next0):
                    self.w.send(self.valid_write(psn, qpn=qpn), 1, v6)
                    self.w.send(bth(SEND_ONLY, qpn, psn) + b"y" * 8, 1, v6)
                    n += 2
        # UD opcode, a CNP and XRC requests (SEND Only, RDMA WRITE Only with
        # an XRCETH naming SRQ 1) to the RC responder
        xrceth = struct.pack(">I", 1)
        for v6 in (self.v6,):
            self.w.send(bth(UD_SEND_ONLY, q, self.next0) + deth(UD_QKEY, self.ud0.qp_num) + b"z" * 8, 1, v6)
            self.w.send(bth(0x81, q, 0) + b"\0" * 16, 1, v6)
            self.w.send(bth(0xA4, q, self.next0) + xrceth + b"x" * 8, 1, v6)
            self.w.send(bth(0xAA, q, self.next0) + xrceth + reth(self.mr1.buf, self.mr1.rkey, 8) + b"x" * 8, 1, v6)
            n += 4
        self.cls("wrong QPN (none, 0, UD QP, QP1, RESET, INIT) and wrong transport (UD opcode, CNP, XRC) to RC", n)
        self.expect("wrong QPN", b, {}, {"rx_dropped": n, "rx_packets": 0})
        self.mem_untouched("wrong QPN")
        self.state_is(self.reset_qp, e.IBV_QPS_RESET, "wrong QPN")
        self.state_is(self.init_qp, e.IBV_QPS_INIT, "wrong QPN")

    def run_ud(self):
        b = self.snap()
        n = 0
        for v6 in (self.v6,):
            for qkey in (0, UD_QKEY ^ 1, GSI_QKEY):
                self.w.send(bth(UD_SEND_ONLY, self.ud1.qp_num, 7) + deth(qkey, 0x42) + b"u" * 32, 1, v6)
                n += 1
            for qkey in (0, UD_QKEY, 0x80010001):
                self.w.send(bth(UD_SEND_ONLY, 1, 7) + deth(qkey, 0x42) + b"m" * 256, 1, v6)
                n += 1
            # right Q_Key, but no receive posted: UD drops it (no RNR)
            self.w.send(bth(UD_SEND_ONLY, self.ud1.qp_num, 8) + deth(UD_QKEY, 0x42) + b"u" * 32, 1, v6)
            n += 1
        self.cls("UD: wrong Q_Key, to QP1 with a wrong Q_Key, no receive posted", n)
        self.expect("UD", b, {}, {"rx_dropped": n, "rx_packets": 0})
        self.no_cqe("UD")

    def run_ud_not_ours(self):
        """Datagrams for a UD QP of DEV1 (a receive posted, the right
        Q_Key, a good ICRC) that are not addressed to DEV1: to the limited
        broadcast address and to the all-hosts group 224.0.0.1 (a multicast
        group with a unicast QPN).  Dropped and counted (rxe's
        rxe_chk_dgid; until 2026-12-07 both were received)."""
        qp = self.d1.qp(self.cq1, self.cq1, qp_type=e.IBV_QPT_UD)
        self.ud_up(qp)
        mr = self.d1.mr(4096)
        qp.post_recv(RecvWR(wr_id=0x77, num_sge=1, sg=[SGE(mr.buf, 1024, mr.lkey)]))
        s = self.w.s4
        s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
        # The group datagram is not looped back to DEV0's socket; the
        # broadcast is (ip_mc_output), and dropped there as well.
        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 0)
        b = self.snap()
        for dst in ("255.255.255.255", "224.0.0.1"):
            roce = bth(UD_SEND_ONLY, qp.qp_num, 9) + deth(UD_QKEY, 0x42) + b"b" * 32
            s.sendto(roce + struct.pack("<I", Wire.icrc(IP0, dst, roce, False)), (dst, ROCE))
            self.w.sent += 1
        self.cls("UD datagrams to the broadcast address and a multicast group with a unicast QPN", 2, 0)
        self.expect("UD not ours", b, {"rx_dropped": (0, 1), "rx_packets": 0}, {"rx_dropped": 2, "rx_packets": 0})
        self.no_cqe("UD not ours")
        qp.close()
        mr.close()

    def run_psn_ahead(self):
        b = self.snap()
        n = 0
        for v6 in (self.v6,):
            for k in range(25):
                self.w.send(self.valid_write(self.next0 + 1000 + n), 1, v6)
                n += 1
        # far ahead, just inside the window
        self.w.send(self.valid_write(self.next0 + (1 << 23) - 1), 1, self.v6)
        n += 1
        self.cls("PSN ahead (sequence NAK once, then silence)", n)
        # One NAK (to qa0, which has nothing outstanding: ignored there).
        self.expect("PSN ahead", b, {"ignored_responses": 1, "rx_packets": 1},
                    {"out_of_sequence": n, "rx_packets": n, "tx_packets": 1})
        self.mem_untouched("PSN ahead")
        self.state_is(self.qa1, e.IBV_QPS_RTS, "PSN ahead")
        self.state_is(self.qa0, e.IBV_QPS_RTS, "PSN ahead (requester)")

    def run_duplicates(self):
        """PSNs in the past: SEND/WRITE re-ACKed without executing, READ /
        atomic without a matching responder resource dropped."""
        b = self.snap()
        n = nack = 0
        q, r = self.qa1.qp_num, self.mr1
        for v6 in (self.v6,):
            for k in range(1, 11):
                self.w.send(self.valid_write(self.next0 - k), 1, v6)
                self.w.send(bth(SEND_ONLY, q, self.next0 - 1000 - k) + b"d" * 16, 1, v6)
                n += 2
                nack += 2
            # reserved bits set: ignored by the receiver (still a duplicate)
            self.w.send(bth(WRITE_ONLY, q, self.next0 - 3, resv8=0xFF, resv7=0x7F, mig=1, ackreq=1) +
                        reth(r.buf, r.rkey, 8) + b"r" * 8, 1, v6)
            n += 1
            nack += 1
            for ln in (8, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF):
                self.w.send(bth(READ_REQ, q, self.next0 - 5) + reth(r.buf, r.rkey, ln), 1, v6)
                n += 1
            self.w.send(bth(FETCH_ADD, q, self.next0 - 2) + atomiceth(r.buf, r.rkey, 1), 1, v6)
            self.w.send(bth(CMP_SWAP, q, self.next0 - 2) + atomiceth(r.buf + 3, r.rkey, 1, 2), 1, v6)
            n += 2
        self.cls("duplicate PSNs (SEND/WRITE, reserved bits set, unknown READ of huge lengths, atomics)", n)
        # (the READ / atomic duplicates have no responder resource: dropped)
        self.expect_acked("duplicates", b, n, nack)
        self.mem_untouched("duplicates")
        self.state_is(self.qa1, e.IBV_QPS_RTS, "duplicates")

    def run_forged_responses(self):
        """To DEV0's requester qa0 (idle: nothing outstanding)."""
        q, p = self.qa0.qp_num, self.next0
        lst = []
        for psn in (p, p - 1, p + 1, p + 5000, p - 5000):
            lst.append(bth(ACK, q, psn) + aeth(0x1F, self.rng.randrange(1 << 24)))  # ACK
            lst.append(bth(ACK, q, psn) + aeth(0x60, 0))  # NAK PSN sequence error
            lst.append(bth(ACK, q, psn) + aeth(0x61, 0))  # NAK invalid request
            lst.append(bth(ACK, q, psn) + aeth(0x62, 0))  # NAK remote access
            lst.append(bth(ACK, q, psn) + aeth(0x63, 0))  # NAK remote operational
            lst.append(bth(ACK, q, psn) + aeth(0x20 | 12, 0))  # RNR NAK
            lst.append(bth(ACK, q, psn) + aeth(0x40, 0))  # reserved syndrome
            lst.append(bth(ACK, q, psn) + aeth(0x7F, 0xFFFFFF))
            lst.append(bth(READ_RESP_ONLY, q, psn) + aeth(0x1F, 1) + b"R" * 64)
            lst.append(bth(READ_RESP_FIRST, q, psn) + aeth(0x1F, 1) + b"R" * self.pmtu)
            lst.append(bth(READ_RESP_LAST, q, psn) + aeth(0x1F, 1) + b"R" * 8)
            lst.append(bth(ATOMIC_ACK, q, psn) + aeth(0x1F, 1) + struct.pack("!Q", 0xDEADBEEF))
        b = self.snap()
        for roce in lst:
            self.w.send(roce, 0, self.v6)
        self.cls("forged ACK/NAK/READ response/atomic ACK to the idle requester (bogus PSN, MSN, syndromes)",
                 len(lst))
        self.expect("forged responses", b, {"ignored_responses": len(lst), "rx_packets": len(lst)}, {})
        self.state_is(self.qa0, e.IBV_QPS_RTS, "forged responses")
        self.no_cqe("forged responses")

    def run_ip_fields(self):
        """Unusual but legal IP/UDP fields on packets that must get through
        (duplicates, so that they are harmless): TOS/ECN, TTL 1, IPv4
        options, IPv6 traffic class and hop limit 1: all outside the ICRC
        or inside it and reproduced."""
        b = self.snap()
        n = 0
        s = self.w.s4
        q = self.qa1.qp_num
        roce = bth(SEND_ONLY, q, self.next0 - 7) + b"o" * 8
        if self.v6:
            s6 = self.w.s6
            for tclass, hops in ((0xFF, 1), (0x03, 255)):
                s6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_TCLASS, tclass)
                s6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_UNICAST_HOPS, hops)
                self.w.send(roce, 1, True)
                n += 1
            s6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_TCLASS, 0)
            s6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_UNICAST_HOPS, 64)
            self.cls("IP fields (IPv6 traffic class incl. ECN CE, hop limit 1 and 255)", n)
            self.expect_acked("IP fields", b, n)
            return
        for tos, ttl in ((0xFF, 1), (0x03, 255), (0xB8, 2)):
            s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
            s.setsockopt(socket.IPPROTO_IP, socket.IP_TTL, ttl)
            self.w.send(roce, 1, False)
            n += 1
        s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, 0)
        s.setsockopt(socket.IPPROTO_IP, socket.IP_TTL, 64)
        # IPv4 options (NOPs: the ICRC covers the options as sent;
        # options that hosts rewrite, such as record route, would
        # legitimately break it).
        for opts in (b"\x01\x01\x01\x01", b"\x01" * 8 + b"\x01\x01\x01\x00"):
            s.setsockopt(socket.IPPROTO_IP, socket.IP_OPTIONS, opts)
            self.w.send_raw(self.w.packet(roce, 1, False, True, opts), 1, False)
            n += 1
        s.setsockopt(socket.IPPROTO_IP, socket.IP_OPTIONS, b"")
        self.cls("IP fields (TOS incl. ECN CE, TTL 1 and 255, IPv4 options)", n)
        self.expect_acked("IP fields", b, n)

    def run_raw_frames(self):
        """Ethernet frames written on the sending netdev (AF_PACKET), for
        IP/UDP fields a UDP socket cannot produce, on packets that must
        still get through (duplicates, so harmless): UDP checksum 0 (no
        checksum, legal over IPv4), an IP datagram longer than its UDP
        length (the UDP stack trims the trailer), and a RoCE packet in two
        IP fragments (reassembled before UDP; the ICRC covers the
        reassembled header: ID kept, no fragment bits)."""
        import json
        import subprocess
        if self.v6:
            print("# (raw frames: IPv4 only)")
            return
        ifname = self.a.ifname
        try:
            j = json.loads(subprocess.run(["ip", "-n", self.a.peer_ns, "-j", "link", "show", self.a.peer_if],
                                          capture_output=True, check=True).stdout)
            dmac = bytes.fromhex(j[0]["address"].replace(":", ""))
            with open(f"/sys/class/net/{ifname}/address") as f:
                smac = bytes.fromhex(f.read().strip().replace(":", ""))
            raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
            raw.bind((ifname, 0))
        except (OSError, subprocess.CalledProcessError, ValueError, KeyError, IndexError) as ex:
            check(False, "raw frames: set up an AF_PACKET socket", str(ex))
            return
        eth = dmac + smac + b"\x08\x00"

        def csum(b):
            if len(b) % 2:
                b += b"\0"
            t = sum(struct.unpack(f"!{len(b) // 2}H", b))
            while t >> 16:
                t = (t & 0xFFFF) + (t >> 16)
            return ~t & 0xFFFF

        def ipv4(payload_len, ident, frag, body, ttl=64):
            h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + payload_len, ident, frag, ttl, 17, 0,
                            socket.inet_aton(IP0), socket.inet_aton(IP1))
            return h[:10] + struct.pack("!H", csum(h)) + h[12:] + body

        q = self.qa1.qp_num
        b = self.snap()
        n = 0
        # (a) UDP checksum 0
        roce = bth(SEND_ONLY, q, self.next0 - 9) + b"c" * 8
        pl = self.w.packet(roce)
        raw.send(eth + ipv4(8 + len(pl), 0, 0x4000, struct.pack("!HHHH", SPORT, ROCE, 8 + len(pl), 0) + pl))
        n += 1
        # (b) 12 bytes of trailer after the UDP datagram (valid checksum
        # over the UDP length); the ICRC covers the IP header as sent, its
        # total length counting the trailer.
        roce = bth(SEND_ONLY, q, self.next0 - 10) + b"t" * 8
        ulen = 8 + len(roce) + 4
        hdr = ipv4(ulen + 12, 0, 0x4000, b"")
        m = bytearray(hdr + struct.pack("!HHHH", SPORT, ROCE, ulen, 0) + roce)
        m[1] = m[8] = m[10] = m[11] = 0xFF  # TOS, TTL, header checksum
        m[26] = m[27] = 0xFF  # UDP checksum
        m[32] = 0xFF  # BTH byte 4
        pl = roce + struct.pack("<I", zlib.crc32(b"\xff" * 8 + bytes(m)) & 0xFFFFFFFF)
        ph = socket.inet_aton(IP0) + socket.inet_aton(IP1) + struct.pack("!BBH", 0, 17, ulen)
        udp = struct.pack("!HHHH", SPORT, ROCE, ulen, 0) + pl
        c = csum(ph + udp) or 0xFFFF
        udp = udp[:6] + struct.pack("!H", c) + udp[8:]
        raw.send(eth + hdr + udp + b"T" * 12)
        n += 1
        # (c) two fragments, ID 0x4242; the ICRC is over the reassembled
        # header (frag_off 0)
        roce = bth(SEND_ONLY, q, self.next0 - 11) + b"f" * 1200
        ulen = 8 + len(roce) + 4
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + ulen, 0x4242, 0, 64, 17, 0, socket.inet_aton(IP0),
                         socket.inet_aton(IP1))
        whole = struct.pack("!HHHH", SPORT, ROCE, ulen, 0) + roce
        whole += struct.pack("<I", icrc_check.icrc(ip + whole + b"\0\0\0\0"))
        cut = 800
        raw.send(eth + ipv4(cut, 0x4242, 0x2000, whole[:cut]))
        raw.send(eth + ipv4(len(whole) - cut, 0x4242, cut // 8, whole[cut:]))
        n += 1
        raw.close()
        self.cls("raw frames: UDP checksum 0, IP trailer beyond the UDP length, IP fragments (2 frames)", n + 1)
        self.expect_acked("raw frames", b, n)

    # -------------------------------------------------------------- victims
    def victim(self, mtu=None):
        q0 = self.d0.qp(self.cq0, self.cq0)
        q1 = self.d1.qp(self.cq1, self.cq1)
        p0, p1 = self.rng.randrange(1 << 24), self.rng.randrange(1 << 24)
        rclib.connect(self.d0, q0, p0, self.d1, q1, p1, mtu or self.mtu, timeout=self.a.timeout)
        return q0, q1, p0

    def run_wrong_source(self):
        """In-sequence, otherwise valid WRITE/SEND to pair A's responder
        from another address of the same subnet (--alt-src/--alt-src6, added
        to the sending interface by the caller): not the QP's peer, so
        dropped (IBA 9.6.1.2's address check; rxe does the same)."""
        if not self.a.alt_src:
            check(False, "wrong source address: no --alt-src given")
            return
        b = self.snap()
        n = 0
        for src, v6 in ((self.a.alt_src6 if self.v6 else self.a.alt_src, self.v6),):
            if not src:
                check(False, "wrong source address: no alternative address of this family given")
                return
            s = socket.socket(socket.AF_INET6 if v6 else socket.AF_INET, socket.SOCK_DGRAM)
            s.bind((src, SPORT))
            if v6:
                s.setsockopt(socket.IPPROTO_IPV6, 23, 2)
            else:
                s.setsockopt(socket.IPPROTO_IP, 10, 2)
            dst = IP6_1 if v6 else IP1
            for roce in (self.valid_write(self.next0), bth(SEND_ONLY, self.qa1.qp_num, self.next0) + b"x" * 8,
                         bth(READ_REQ, self.qa1.qp_num, self.next0) + reth(self.mr1.buf, self.mr1.rkey, 64)):
                c = Wire.icrc(src, dst, roce, v6)
                s.sendto(roce + struct.pack("<I", c), (dst, ROCE))
                n += 1
            s.close()
        self.cls("in-sequence WRITE/SEND/READ from a source address that is not the QP's peer", n)
        self.expect("wrong source address", b, {}, {"rx_dropped": n, "rx_packets": 0})
        self.mem_untouched("wrong source address")
        self.state_is(self.qa1, e.IBV_QPS_RTS, "wrong source address")

    def run_victims(self):
        """In-sequence, valid-looking requests the responder must refuse
        with a NAK (IBA 9.7.5.2.x), moving its QP to the error state; one
        fresh QP pair each.  The NAK reaches the victim requester with a
        PSN it never sent: ignored there (it stays RTS)."""
        r, ro = self.mr1, self.mr_other_pd
        top = 2**64 - 0x100
        cases = [
            ("WRITE with a random R_Key", "access", lambda q, p: bth(WRITE_ONLY, q, p) +
             reth(r.buf, self.rng.randrange(1 << 32) | 0x10000000, 8) + b"w" * 8),
            ("WRITE with the R_Key of another PD's MR", "access", lambda q, p: bth(WRITE_ONLY, q, p) +
             reth(ro.buf, ro.rkey, 8) + b"w" * 8),
            ("WRITE with a deregistered MR's R_Key", "access", lambda q, p: bth(WRITE_ONLY, q, p) +
             reth(self.dead_va, self.dead_rkey, 8) + b"w" * 8),
            ("WRITE past the end of the MR", "access", lambda q, p: bth(WRITE_ONLY, q, p) +
             reth(r.buf + (1 << 16) - 8, r.rkey, 16) + b"w" * 16),
            ("WRITE_FIRST whose VA + length wraps around 2^64", "access", lambda q, p: bth(WRITE_FIRST, q, p) +
             reth(top, r.rkey, 0x200 + self.pmtu) + b"w" * self.pmtu),
            ("READ past the end of the MR", "access", lambda q, p: bth(READ_REQ, q, p) +
             reth(r.buf + 8, r.rkey, 1 << 16)),
            ("READ of 2 GiB - 1 from a 64 KiB MR", "access", lambda q, p: bth(READ_REQ, q, p) +
             reth(r.buf, r.rkey, 0x7FFFFFFF)),
            ("READ whose VA + length wraps around 2^64", "access", lambda q, p: bth(READ_REQ, q, p) +
             reth(top, r.rkey, 0x1000)),
            ("READ of 4 GiB - 1 (beyond 2^31)", "invalid", lambda q, p: bth(READ_REQ, q, p) +
             reth(r.buf, r.rkey, 0xFFFFFFFF)),
            ("FETCH_ADD at a misaligned address", "invalid", lambda q, p: bth(FETCH_ADD, q, p) +
             atomiceth(r.buf + 4, r.rkey, 1)),
            ("CMP_SWAP with a random R_Key", "access", lambda q, p: bth(CMP_SWAP, q, p) +
             atomiceth(r.buf, 0x7777700, 1, 0)),
            ("ATOMIC_WRITE at a misaligned address", "invalid", lambda q, p: bth(ATOMIC_WRITE, q, p) +
             reth(r.buf + 4, r.rkey, 8) + b"a" * 8),
            ("ATOMIC_WRITE with 4 payload bytes", "invalid", lambda q, p: bth(ATOMIC_WRITE, q, p) +
             reth(r.buf, r.rkey, 8) + b"a" * 4),
            ("ATOMIC_WRITE with a random R_Key", "access", lambda q, p: bth(ATOMIC_WRITE, q, p) +
             reth(r.buf, self.rng.randrange(1 << 32) | 0x10000000, 8) + b"a" * 8),
            ("FLUSH on a QP and an MR without FLUSH access", "access", lambda q, p: bth(FLUSH, q, p, ackreq=1) +
             feth(FLUSH_GLOBAL) + reth(r.buf, r.rkey, 64)),
            ("FLUSH without a placement type", "invalid", lambda q, p: bth(FLUSH, q, p, ackreq=1) +
             feth(0) + reth(r.buf, r.rkey, 64)),
            ("FLUSH with an unknown selectivity level", "invalid", lambda q, p: bth(FLUSH, q, p, ackreq=1) +
             feth(FLUSH_GLOBAL, 2) + reth(r.buf, r.rkey, 64)),
            ("SEND_ONLY longer than the path MTU", "invalid", lambda q, p: bth(SEND_ONLY, q, p) +
             b"s" * (self.pmtu + 256)),
            ("WRITE_ONLY whose RETH length differs from its payload", "invalid", lambda q, p: bth(WRITE_ONLY, q, p) +
             reth(r.buf, r.rkey, 4) + b"w" * 16),
            ("SEND_MIDDLE without a SEND_FIRST", "invalid", lambda q, p: bth(SEND_MIDDLE, q, p) +
             b"s" * self.pmtu),
            ("WRITE_ONLY with 4 GiB - 1 length in its RETH", "invalid", lambda q, p: bth(WRITE_ONLY, q, p) +
             reth(r.buf, r.rkey, 0xFFFFFFFF) + b"w" * 8),
            ("SEND_ONLY of 64 B into a 16 B receive", "recv", lambda q, p: bth(SEND_ONLY, q, p) + b"s" * 64),
        ]
        n = 0
        for desc, kind, make in cases:
            q0, q1, p = self.victim(rclib.MTU_ENUM[256] if "path MTU" in desc else None)
            if "path MTU" in desc:
                saved = self.pmtu
                self.pmtu = 256
            rmr = None
            if kind == "recv":
                rmr = self.d1.mr(4096)
                q1.post_recv(RecvWR(wr_id=0x5151, num_sge=1, sg=[SGE(rmr.buf, 16, rmr.lkey)]))
            b = self.snap()
            self.w.send(make(q1.qp_num, p), 1, self.v6)
            n += 1
            if "path MTU" in desc:
                self.pmtu = saved
            print(f"# victim: {desc}")
            key = "access_naks_sent" if kind == "access" else "invalid_naks_sent"
            want1 = {key: 1, "rx_packets": 1, "tx_packets": 1}
            if kind == "recv":
                want1["completion_errors"] = 1
            self.expect(f"victim '{desc}'", b, {"ignored_responses": 1, "rx_packets": 1}, want1)
            if kind == "recv":
                wcs = rclib.poll(self.cq1, 1, time.monotonic() + 5 * self.scale)
                check(len(wcs) == 1 and wcs[0].wr_id == 0x5151 and wcs[0].status == e.IBV_WC_LOC_LEN_ERR,
                      f"victim '{desc}': the receive completes with LOC_LEN_ERR",
                      "; ".join(wc_str(w) for w in wcs) or "no completion")
                rmr.close()
            self.state_is(q1, e.IBV_QPS_ERR, f"victim '{desc}': responder")
            self.state_is(q0, e.IBV_QPS_RTS, f"victim '{desc}': requester (NAK for a PSN it never sent)")
            self.mem_untouched(f"victim '{desc}'")
            q0.close()
            q1.close()
        self.cls("in-sequence NAK-triggering (bad/foreign/dead R_Key, out-of-bounds and wrapping RETH, "
                 "huge READ, misaligned atomic, bad ATOMIC_WRITE and FLUSH, oversized, bad opcode sequence), "
                 "one victim pair each", n)
        self.no_cqe("victims")

    # ----------------------------------------------------------------- FLUSH
    def run_flush(self):
        """IBTA 1.5 FLUSH at rroce as the responder, as an rdma_rxe or mlx5
        peer with rdma-core >= 45 sends it (libibverbs 44 has no
        ibv_wr_flush, so the requests are forged here, in sequence, on a
        fresh pair whose QPs and region grant FLUSH_GLOBAL): the device
        offers global placement and not persistence; a range and a
        whole-region FLUSH are answered with an empty READ response (which
        reaches the pair's requester for a PSN it never sent: ignored
        there) and move the ePSN by one each; a duplicate is answered again;
        the WRITE after them executes at the next PSN; a persistent FLUSH
        is refused with NAK remote access error."""
        caps = self.d1.ctx.query_device_ex().device_cap_flags_ex
        check(caps & DEVICE_FLUSH_GLOBAL and not caps & DEVICE_FLUSH_PERSISTENT,
              "FLUSH: device_cap_flags_ex has FLUSH_GLOBAL, not FLUSH_PERSISTENT", f"{caps:#x}")
        err = 0
        try:
            MR(self.d1.pd, 4096, rclib.ALL_ACCESS | ACCESS_FLUSH_PERSISTENT).close()
        except PyverbsRDMAError as ex:
            err = ex.error_code
        check(err == errno.EOPNOTSUPP, "FLUSH: reg_mr with IBV_ACCESS_FLUSH_PERSISTENT -> EOPNOTSUPP", f"errno {err}")
        access = rclib.ALL_ACCESS | ACCESS_FLUSH_GLOBAL
        fmr = self.d1.mr(1 << 16, access)
        pattern = self.rng.randbytes(1 << 16)
        fmr.write(pattern, len(pattern), 0)
        q0 = self.d0.qp(self.cq0, self.cq0)
        q1 = self.d1.qp(self.cq1, self.cq1)
        p = self.rng.randrange(1 << 24)
        rclib.connect(self.d0, q0, p, self.d1, q1, self.rng.randrange(1 << 24), self.mtu,
                      timeout=self.a.timeout, access=access)
        qn = q1.qp_num
        answered0 = {"ignored_responses": 1, "rx_packets": 1}
        answered1 = {"rx_packets": 1, "tx_packets": 1}
        steps = [
            ("FLUSH GLOBAL of a 4 KiB range", bth(FLUSH, qn, p, ackreq=1) + feth(FLUSH_GLOBAL) +
             reth(fmr.buf + 4096, fmr.rkey, 4096), answered1),
            ("FLUSH GLOBAL of the whole region (RETH range, outside it, ignored)", bth(FLUSH, qn, p + 1, ackreq=1) +
             feth(FLUSH_GLOBAL, FLUSH_MR) + reth(0, fmr.rkey, 4096), answered1),
            ("the first FLUSH again (duplicate)", bth(FLUSH, qn, p, ackreq=1) + feth(FLUSH_GLOBAL) +
             reth(fmr.buf + 4096, fmr.rkey, 4096), dict(answered1, duplicate_requests=1)),
            ("FLUSH GLOBAL of an empty range", bth(FLUSH, qn, p + 2, ackreq=1) + feth(FLUSH_GLOBAL) +
             reth(fmr.buf, fmr.rkey, 0), answered1),
        ]
        for desc, pkt, want1 in steps:
            b = self.snap()
            self.w.send(pkt, 1, self.v6)
            print(f"# flush: {desc}")
            self.expect(f"FLUSH: {desc}", b, answered0, want1)
            self.state_is(q1, e.IBV_QPS_RTS, f"FLUSH: {desc}: responder")
        # The ePSN moved by exactly three: a WRITE at p + 3 executes.
        b = self.snap()
        self.w.send(bth(WRITE_ONLY, qn, p + 3, ackreq=1) + reth(fmr.buf, fmr.rkey, 64) + bytes([0xEE]) * 64,
                    1, self.v6)
        self.expect("FLUSH: a WRITE at the next PSN", b, answered0, answered1)
        got = fmr.read(len(pattern), 0)
        want = bytes([0xEE]) * 64 + pattern[64:]
        at, n = rclib.first_diff(got, want)
        check(at < 0, "FLUSH: the WRITE after the FLUSHes landed, nothing else changed",
              f"{n} bytes differ, first at {at}")
        # Persistence is not granted: NAK remote access error.
        b = self.snap()
        self.w.send(bth(FLUSH, qn, p + 4, ackreq=1) + feth(FLUSH_PERSISTENT) + reth(fmr.buf, fmr.rkey, 64),
                    1, self.v6)
        self.expect("FLUSH PERSISTENT: remote access NAK", b, answered0, dict(answered1, access_naks_sent=1))
        self.state_is(q1, e.IBV_QPS_ERR, "FLUSH PERSISTENT: responder")
        self.state_is(q0, e.IBV_QPS_RTS, "FLUSH PERSISTENT: requester (NAK for a PSN it never sent)")
        q0.close()
        q1.close()
        # The region's own access, on pairs whose QPs grant the placement
        # type: a region without FLUSH_GLOBAL, and a persistence request
        # (no region can grant it): NAK remote access.
        plain_mr = self.d1.mr(4096)
        for desc, qaccess, mr, placement in (
                ("a region without FLUSH access", access, plain_mr, FLUSH_GLOBAL),
                ("PERSISTENT, granted by the QPs, not by the region", access | ACCESS_FLUSH_PERSISTENT, fmr,
                 FLUSH_PERSISTENT)):
            q0 = self.d0.qp(self.cq0, self.cq0)
            q1 = self.d1.qp(self.cq1, self.cq1)
            p = self.rng.randrange(1 << 24)
            rclib.connect(self.d0, q0, p, self.d1, q1, self.rng.randrange(1 << 24), self.mtu,
                          timeout=self.a.timeout, access=qaccess)
            b = self.snap()
            self.w.send(bth(FLUSH, q1.qp_num, p, ackreq=1) + feth(placement) + reth(mr.buf, mr.rkey, 64), 1, self.v6)
            print(f"# flush: {desc}")
            self.expect(f"FLUSH to {desc}: remote access NAK", b, answered0, dict(answered1, access_naks_sent=1))
            self.state_is(q1, e.IBV_QPS_ERR, f"FLUSH to {desc}: responder")
            q0.close()
            q1.close()
        self.cls("FLUSH (IBTA 1.5): range, whole region, duplicate, empty range, persistent, region without access",
                 len(steps) + 3)
        plain_mr.close()
        fmr.close()

    # ------------------------------------------------------------ READ flood
    def run_read_flood(self):
        """A READ flood at a fresh pair: 300 in-sequence READ requests of
        16 MiB each, far more than any requester may have outstanding (128
        here), sent in one burst, so the first response stream (16 Ki
        packets) is still going out when the last request arrives.  The
        responder queues responses for as many as its queue holds (2 x 128
        + 2 entries) and drops the rest unprocessed, each counted in
        resp_backpressure (never a response made and thrown away: nothing
        else is NAKed or dropped, but for the out-of-sequence requests those
        drops cause, as lost packets do); destroying the responder QP with
        gigabytes of responses queued stops them; the device keeps working
        (the fresh pairs at the end)."""
        if self.v6:
            return  # (the IPv4 run covers it; the queue does not care)
        n, size = 300, 16 << 20
        mr = self.d1.mr(size)
        q0 = self.d0.qp(self.cq0, self.cq0)
        q1 = self.d1.qp(self.cq1, self.cq1)
        p = self.rng.randrange(1 << 24)
        rclib.connect(self.d0, q0, p, self.d1, q1, self.rng.randrange(1 << 24), self.mtu, timeout=self.a.timeout)
        per = size // self.pmtu
        b = self.snap()
        t = time.monotonic()
        for k in range(n):
            self.w.send(bth(READ_REQ, q1.qp_num, (p + k * per) & 0xFFFFFF) + reth(mr.buf, mr.rkey, size), 1, self.v6)
        sent_in = time.monotonic() - t
        d0, d1 = self.wait_counters(b, {}, {"rx_packets": n})
        bp, acc = d1["resp_backpressure"] or 0, n - (d1["resp_backpressure"] or 0)
        print(f"# read flood: {n} requests sent in {sent_in:.2f} s; {acc} accepted, {bp} dropped for a full"
              f" response queue; responses so far: tx +{d1['tx_packets']}")
        check(d1["rx_packets"] == n, f"READ flood: all {n} requests reached {self.a.dev1}", f"rx_packets +{d1['rx_packets']}")
        check(bp > 0 and acc >= 128, "READ flood: the response queue filled and pushed back (resp_backpressure)",
              f"resp_backpressure +{bp}, accepted {acc}")
        # A request dropped for want of room is like a lost packet: if the
        # queue drains while the burst still arrives (a response stream
        # ended: seen with one vCPU, where this sender and the responder
        # take turns), the next request is out of sequence, NAKed once, and
        # the rest wait for the requester's go-back-N, which this burst has
        # not got.  Nothing else may move.
        fine = ("rx_packets", "tx_packets", "resp_backpressure", "out_of_sequence")
        quiet = {k: v for k, v in d1.items() if k not in fine and v}
        if d1["out_of_sequence"]:
            print(f"# read flood: out_of_sequence +{d1['out_of_sequence']} (the queue drained during the burst)")
        check(not quiet and d1["out_of_sequence"] <= bp,
              "READ flood: no NAK, drop or error on the responder besides the back-pressure and what its drops cause",
              " ".join(f"{k} +{v}" for k, v in d1.items() if k in quiet or k == "out_of_sequence"))
        self.state_is(q1, e.IBV_QPS_RTS, "READ flood: responder")
        # Destroying the responder stops its queued responses.
        t = time.monotonic()
        q1.close()
        closed_in = time.monotonic() - t
        a1 = read_counters(self.a.dev1)["tx_packets"]
        time.sleep(0.5 * self.scale)
        a2 = read_counters(self.a.dev1)["tx_packets"]
        check(a2 == a1, f"READ flood: destroying the responder QP ({closed_in:.2f} s) stopped its responses",
              f"tx_packets +{a2 - a1} in 0.5 s after the destroy")
        q0.close()
        mr.close()
        self.cls("READ flood: 300 READs of 16 MiB (back-pressure)", n)

    # ----------------------------------------------------------------- flood
    def flood_set(self):
        """A pool of harmless packets (none may change pair A's state) with
        what each must do: (payload, to, v6, kind)."""
        q, p, r = self.qa1.qp_num, self.next0, self.mr1
        pool = []
        for desc, roce, with_icrc in self.malformed():
            for v6 in (False, True):
                pool.append(((self.w.packet(roce, 1, v6) if with_icrc else roce), 1, v6, "drop1"))
        for v6 in (self.v6,):
            pool.append((self.w.packet(self.valid_write(p), 1, v6, False), 1, v6, "icrc1"))
            pool.append((self.w.packet(self.valid_write(p, qpn=0xABCDE), 1, v6), 1, v6, "drop1"))
            pool.append((self.w.packet(self.valid_write(p, qpn=self.reset_qp.qp_num), 1, v6), 1, v6, "drop1"))
            pool.append((self.w.packet(bth(UD_SEND_ONLY, self.ud1.qp_num, 1) + deth(7, 1) + b"f" * 8, 1, v6),
                         1, v6, "drop1"))
            for k in range(4):
                pool.append((self.w.packet(self.valid_write(p + 2000 + k), 1, v6), 1, v6, "ooo1"))
                pool.append((self.w.packet(bth(READ_REQ, q, p - 10 - k) + reth(r.buf, r.rkey, 1 << 30), 1, v6),
                             1, v6, "dup1"))
            # random bytes, too short for a BTH + ICRC / not a multiple of 4
            pool.append((self.rng.randbytes(10), 1, v6, "drop1"))
            pool.append((self.rng.randbytes(37), 1, v6, "drop1"))
        for k in range(4):
            pool.append((self.w.packet(bth(ACK, self.qa0.qp_num, p + 3 + k) + aeth(0x62, 0), 0, self.v6), 0, self.v6,
                         "ign0"))
            pool.append((self.w.packet(bth(READ_RESP_ONLY, self.qa0.qp_num, p - 3 - k) + aeth(0x1F, 0) + b"F" * 32,
                                       0, self.v6), 0, self.v6, "ign0"))
        return pool

    def run_flood(self):
        total, procs = self.a.flood, max(1, self.a.procs)
        if total <= 0:
            return
        pool = self.flood_set()
        per = total // procs
        plan = [self.rng.randrange(len(pool)) for _ in range(per)]
        counts = {}
        for i in plan:
            counts[pool[i][3]] = counts.get(pool[i][3], 0) + 1
        b = self.snap()
        sd = softnet_drops()
        t0 = time.monotonic()
        pids = []
        for k in range(procs):
            pid = os.fork()
            if pid == 0:
                code = 0
                try:
                    # The parent's sockets: the UDP source port is in the
                    # ICRC.
                    dst = {(1, False): (IP1, ROCE), (1, True): (IP6_1, ROCE), (0, False): (IP0, ROCE),
                           (0, True): (IP6_0, ROCE)}
                    socks = self.w.socks
                    for i in plan:
                        pl, to, v6, _ = pool[i]
                        try:
                            socks[(to, v6)].sendto(pl, dst[(to, v6)])
                        except OSError:
                            code = 3
                except BaseException:  # noqa: BLE001 - never return into the parent's code
                    code = 2
                os._exit(code)
            pids.append(pid)
        codes = [os.waitpid(pid, 0)[1] for pid in pids]
        dt = time.monotonic() - t0
        sent = per * procs
        n6 = sum(1 for i in plan if pool[i][2]) * procs
        self.cls(f"flood of mixed packets from {procs} processes", sent - n6, n6)
        print(f"#   flood: {sent} packets in {dt:.1f} s ({sent / max(dt, 1e-6):.0f} packets/s); per process: "
              + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), flush=True)
        check(all(c == 0 for c in codes), "flood: every sender process finished", f"wait statuses {codes}")
        n1 = sum(v for k, v in counts.items() if k.endswith("1")) * procs
        n0 = sum(v for k, v in counts.items() if k.endswith("0")) * procs
        end = time.monotonic() + 30 * self.scale
        while time.monotonic() < end:
            d0, d1 = self.delta(b)
            got1 = d1["rx_dropped"] + d1["rx_icrc_errors"] + d1["rx_packets"]
            got0 = d0["rx_dropped"] + d0["rx_icrc_errors"] + d0["rx_packets"]
            if got1 >= n1 and got0 >= n0:
                break
            time.sleep(0.1)
        time.sleep(0.3 * self.scale)
        d0, d1 = self.delta(b)
        lost = softnet_drops() - sd
        got1 = d1["rx_dropped"] + d1["rx_icrc_errors"] + d1["rx_packets"]
        got0 = d0["rx_dropped"] + d0["rx_icrc_errors"] + d0["rx_packets"]
        print(f"#   {self.a.dev1}: rx_dropped +{d1['rx_dropped']} rx_icrc_errors +{d1['rx_icrc_errors']} "
              f"rx_packets +{d1['rx_packets']} out_of_sequence +{d1['out_of_sequence']} duplicate_requests "
              f"+{d1['duplicate_requests']} tx_packets +{d1['tx_packets']}; {self.a.dev0}: rx_packets "
              f"+{d0['rx_packets']} ignored_responses +{d0['ignored_responses']}; softnet drops +{lost}",
              flush=True)
        # Every packet that reached a device is accounted for, exactly once,
        # by its counters (the rest were dropped by the network stack).
        check(n1 - lost <= got1 <= n1, f"flood: {self.a.dev1} accounted for every packet it got",
              f"{got1} of {n1} sent, {lost} dropped by the stack")
        # (DEV0 also receives the NAKs/ACKs DEV1 sends in reply.)
        check(n0 - lost <= got0, f"flood: {self.a.dev0} accounted for every packet it got",
              f"{got0} of {n0} sent, {lost} dropped by the stack")
        icrc_sent = counts.get("icrc1", 0) * procs
        check(icrc_sent - lost <= d1["rx_icrc_errors"] <= icrc_sent, "flood: rx_icrc_errors match",
              f"+{d1['rx_icrc_errors']}, {icrc_sent} sent")
        for k in ("completion_errors", "access_naks_sent", "invalid_naks_sent"):
            check(d0[k] == 0 and d1[k] == 0, f"flood: no {k}", f"{d0[k]} / {d1[k]}")
        self.mem_untouched("flood")
        self.state_is(self.qa1, e.IBV_QPS_RTS, "flood: responder")
        self.state_is(self.qa0, e.IBV_QPS_RTS, "flood: requester")

    # ---------------------------------------------------------- verification
    def transfer(self, q0, q1, what, mr0, mr1, first_psn=None):
        """SEND, WRITE and READ of a few sizes q0 -> q1, bytes checked.
        Returns the number of PSNs used."""
        used = 0
        deadline = time.monotonic() + 30 * self.scale
        ok = True
        detail = ""
        for op, size in (("send", 1), ("send", 4096), ("write", 3000), ("write", 40000), ("read", 5000),
                         ("read", 65536), ("send", 16384)):
            data = self.rng.randbytes(size)
            if op == "read":
                mr1.write(data, size, 0)
            else:
                mr0.write(data, size, 0)
                mr1.write(b"\0" * size, size, 0)
            if op == "send":
                q1.post_recv(RecvWR(wr_id=0x1111, num_sge=1, sg=[SGE(mr1.buf, 1 << 16, mr1.lkey)]))
            opc = {"send": e.IBV_WR_SEND, "write": e.IBV_WR_RDMA_WRITE, "read": e.IBV_WR_RDMA_READ}[op]
            wr = SendWR(wr_id=0x2222, opcode=opc, num_sge=1, sg=[SGE(mr0.buf, size, mr0.lkey)],
                        send_flags=e.IBV_SEND_SIGNALED)
            if op != "send":
                wr.set_wr_rdma(mr1.rkey, mr1.buf)
            q0.post_send(wr)
            used += max(1, -(-size // self.pmtu))
            wcs = rclib.poll(self.cq0, 1, deadline)
            if op == "send":
                wcs += rclib.poll(self.cq1, 1, deadline)
            want = 2 if op == "send" else 1
            if len(wcs) != want or any(w.status != e.IBV_WC_SUCCESS for w in wcs):
                ok = False
                detail = f"{op} {size}: completions {[wc_str(w) for w in wcs]}"
                break
            if op == "send" and wcs[1].byte_len != size:
                ok = False
                detail = f"send {size}: receive byte_len {wcs[1].byte_len}"
                break
            got = (mr0 if op == "read" else mr1).read(size, 0)
            if got != data:
                at, nd = rclib.first_diff(got, data)
                ok = False
                detail = f"{op} {size}: {nd} bytes differ, first at {at}"
                break
        check(ok, f"{what}: SEND/WRITE/READ 1 B .. 64 KiB, completions and bytes checked", detail)
        return used

    def verify_live(self, what):
        used = self.transfer(self.qa0, self.qa1, what, self.mr0, self.mr1)
        self.next0 = (self.next0 + used) & 0xFFFFFF
        self.mr1.write(self.pattern1, len(self.pattern1), 0)

    def verify_fresh(self):
        q0 = self.d0.qp(self.cq0, self.cq0, send_wr=64, recv_wr=64)
        q1 = self.d1.qp(self.cq1, self.cq1, send_wr=64, recv_wr=64)
        rclib.connect(self.d0, q0, 0x123, self.d1, q1, 0x456, self.mtu, timeout=self.a.timeout)
        m0, m1 = self.d0.mr(1 << 16), self.d1.mr(1 << 16)
        self.transfer(q0, q1, "fresh RC QP pair", m0, m1)

    def verify_ud(self):
        m0, m1 = self.d0.mr(4096), self.d1.mr(4096)
        data = self.rng.randbytes(200)
        m0.write(data, len(data), 0)
        self.ud1.post_recv(RecvWR(wr_id=0x33, num_sge=1, sg=[SGE(m1.buf, 4096, m1.lkey)]))
        ah = AH(self.d0.pd, attr=rclib.ah_to(self.d0, self.d1))
        wr = SendWR(wr_id=0x44, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(m0.buf, len(data), m0.lkey)],
                    send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_ud(ah, self.ud1.qp_num, UD_QKEY)
        self.ud0.post_send(wr)
        deadline = time.monotonic() + 20 * self.scale
        s = rclib.poll(self.cq0, 1, deadline)
        r = rclib.poll(self.cq1, 1, deadline)
        ok = len(s) == 1 and len(r) == 1 and s[0].status == 0 and r[0].status == 0 and \
            r[0].byte_len == 40 + len(data) and m1.read(len(data), 40) == data
        check(ok, "UD datagram DEV0 -> DEV1 after the attacks: delivered intact",
              f"send {[wc_str(w) for w in s]} recv {[wc_str(w) for w in r]}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("dev0")
    p.add_argument("gid0", type=int)
    p.add_argument("dev1")
    p.add_argument("gid1", type=int)
    p.add_argument("--flood", type=int, default=30000)
    p.add_argument("--procs", type=int, default=2)
    p.add_argument("--timeout", type=int, default=14)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--only", default="")
    p.add_argument("--v6", action="store_true", help="pair A over IPv6 (GID0/GID1 must be IPv6 GIDs), packets IPv6")
    p.add_argument("--ifname", default="rr0", help="netdev of IP0 (to write raw frames on)")
    p.add_argument("--peer-ns", default="peer")
    p.add_argument("--peer-if", default="rr1")
    p.add_argument("--alt-src", default="", help="another IPv4 address of the sending interface")
    p.add_argument("--alt-src6", default="", help="another IPv6 address of the sending interface")
    a = p.parse_args()
    if a.seed is None:
        a.seed = random.randrange(1 << 30)
    print(f"# seed {a.seed}")
    t0 = time.monotonic()
    h = Hostile(a)
    h.verify_live("pair A before the attacks")
    print(f"# setup and first transfer: {time.monotonic() - t0:.1f} s")
    steps = [("malformed", h.run_malformed), ("icrc", h.run_bad_icrc), ("qpn", h.run_wrong_qpn),
             ("ud", h.run_ud), ("udnotours", h.run_ud_not_ours), ("ahead", h.run_psn_ahead), ("dup", h.run_duplicates),
             ("resp", h.run_forged_responses), ("ip", h.run_ip_fields), ("source", h.run_wrong_source), ("raw", h.run_raw_frames),
             ("victims", h.run_victims), ("flush", h.run_flush), ("readflood", h.run_read_flood),
             ("flood", h.run_flood)]
    only = set(a.only.split(",")) if a.only else None
    for name, fn in steps:
        if only and name not in only:
            continue
        t = time.monotonic()
        fn()
        h.no_cqe(f"after {name}")
        print(f"# step {name}: {time.monotonic() - t:.1f} s")
    h.state_is(h.qa1, e.IBV_QPS_RTS, "pair A responder after everything")
    h.state_is(h.qa0, e.IBV_QPS_RTS, "pair A requester after everything")
    h.verify_live("pair A (the same live QPs) after the attacks")
    h.verify_fresh()
    h.verify_ud()
    print(f"# total: {time.monotonic() - t0:.1f} s")
    tot4 = sum(c[1] for c in h.classes)
    tot6 = sum(c[2] for c in h.classes)
    print(f"# total injected: {tot4 + tot6} packets ({tot4} IPv4, {tot6} IPv6) in {len(h.classes)} classes")
    finish()


if __name__ == "__main__":
    main()
