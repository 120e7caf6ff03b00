#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Packets that arrive in page fragments, read where they lie.

Usage: rx_frags.py [--dev rroce9] [--ifname rrtap0]

Creates a tap device with IFF_NAPI_FRAGS (each iovec of a write after the
first becomes one page fragment of the skb, as virtio-net delivers the
bytes after the Ethernet header), puts an rroce device on it and connects
an RC QP to a peer that is this script: it writes Ethernet frames of RoCEv2
requests (ICRC computed with icrc_check.icrc) into the tap and reads the
driver's ACKs back from it.  Each request is written in several shapes:

- one fragment after the Ethernet header, after IP+UDP, or exactly after
  the RoCE headers: read in place (`rx_linearized` does not move);
- a fragment starting inside the payload, or two fragments: copied first
  (`rx_linearized` counts each);

and for each the responder's memory (WRITE) or receive buffer (SEND) must
hold exactly the bytes sent, the ACK must come back with the right PSN and
a correct ICRC, and no drop may be counted.  Then in fragments: a wrong
ICRC byte in the fragment (`rx_icrc_errors`, memory untouched), a packet
too short for its RETH (`rx_dropped`), payloads with pad bytes and an
empty WRITE (the fragment holds only the ICRC), and a 3-packet WRITE.
"""
import argparse
import fcntl
import os
import random
import select
import socket
import struct
import subprocess
import sys
import time

import pyverbs.enums as e
from pyverbs.addr import GID
from pyverbs.wr import SGE, RecvWR

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import icrc_check  # noqa: E402
import rclib  # noqa: E402
from hostile_pkt import ACK, SEND_ONLY, WRITE_FIRST, WRITE_ONLY, bth, reth  # noqa: E402
from taplib import check, finish  # noqa: E402

TUNSETIFF = 0x400454CA
IFF_TAP, IFF_NAPI, IFF_NAPI_FRAGS, IFF_NO_PI = 0x0002, 0x0010, 0x0020, 0x1000
ME, PEER = "10.79.0.1", "10.79.0.2"
PEER_MAC = bytes.fromhex("020000007902")
PEER_QPN = 0x000123
SPORT = 49152
ROCE = 4791
MTU = 1024
BENCH = False


def sh(*args):
    subprocess.run(args, check=True, capture_output=True)


def csum(b):
    t = sum(struct.unpack(f"!{len(b) // 2}H", b))
    while t >> 16:
        t = (t & 0xFFFF) + (t >> 16)
    return ~t & 0xFFFF


class Tap:
    def __init__(self, ifname):
        self.fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
        ifr = struct.pack("16sH", ifname.encode(), IFF_TAP | IFF_NO_PI | IFF_NAPI | IFF_NAPI_FRAGS)
        fcntl.ioctl(self.fd, TUNSETIFF, ifr)
        self.ifname = ifname
        # udev gives a new tap a "persistent" MAC address of its own
        # (systemd's MACAddressPolicy=persistent) when it handles the
        # device's uevent: on a loaded machine that came after the address
        # set below and replaced it, so the frames written here, sent to
        # the old address, were dropped as another host's before IP
        # (rx_frags and xrc_switch on the debug kernel, three times).  Let
        # udev finish with the device first, then check the address.
        try:
            subprocess.run(["udevadm", "settle", "-t", "30"], capture_output=True)
        except FileNotFoundError:
            pass  # no udev, no race
        sh("ip", "link", "set", ifname, "address", "02:00:00:00:79:01", "up")
        sh("ip", "addr", "add", f"{ME}/24", "dev", ifname)
        sh("ip", "neigh", "replace", PEER, "lladdr", "02:00:00:00:79:02", "dev", ifname, "nud", "permanent")
        self.mac = bytes.fromhex("020000007901")
        check(self.address() == self.mac, f"{ifname} keeps the address set", self.address().hex(":"))

    def address(self):
        """The tap's MAC address now."""
        with open(f"/sys/class/net/{self.ifname}/address") as f:
            return bytes.fromhex(f.read().strip().replace(":", ""))

    def frame(self, roce_no_icrc, bad_icrc=False, udp_extra=0):
        """Ethernet + IPv4 + UDP + roce + ICRC, from PEER to ME."""
        ulen = 8 + len(roce_no_icrc) + 4
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + ulen, 0, 0x4000, 64, 17, 0,
                         socket.inet_aton(PEER), socket.inet_aton(ME))
        ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
        udp = struct.pack("!HHHH", SPORT, ROCE, ulen, 0)
        c = icrc_check.icrc(ip + udp + roce_no_icrc + b"\0\0\0\0")
        if bad_icrc:
            c ^= 0x00010000
        return self.mac + PEER_MAC + b"\x08\x00" + ip + udp + roce_no_icrc + struct.pack("<I", c)

    def write(self, segs):
        os.writev(self.fd, segs)

    def acks(self, want_psn, tmo=5.0, ack=ACK):
        """Read frames until an ACK (opcode `ack`) for want_psn (ICRC
        checked); returns (found, bad_icrc_frames, naks)."""
        bad = naks = 0
        for roce, icrc_ok in frames(self, tmo):
            if not icrc_ok:
                bad += 1
                continue
            op, psn = roce[0], struct.unpack("!I", roce[8:12])[0] & 0xFFFFFF
            if op != ack:
                continue
            syndrome = roce[12]
            if syndrome >> 5 != 0:
                naks += 1
            elif psn == want_psn:
                return True, bad, naks
        return False, bad, naks

    def close(self):
        os.close(self.fd)


def counters(dev):
    d = f"/sys/class/infiniband/{dev}/ports/1/hw_counters"
    out = {}
    for n in ("rx_packets", "rx_dropped", "rx_icrc_errors", "rx_linearized", "out_of_sequence",
              "duplicate_requests"):
        try:
            with open(f"{d}/{n}") as f:
                out[n] = int(f.read())
        except FileNotFoundError:
            if n != "rx_linearized" or not BENCH:
                raise
            out[n] = 0  # an older rroce.ko in bench mode
    return out


def delta(a, b):
    return {k: b[k] - a[k] for k in a if b[k] != a[k]}


def wait_delta(dev, before, want, tmo=2.0):
    """The counters' change since `before` once it is `want`, or what it is
    after tmo seconds (ib_core caches hw_counters for a few ms)."""
    deadline = time.monotonic() + tmo
    while True:
        dl = delta(before, counters(dev))
        if dl == want or time.monotonic() > deadline:
            return dl
        time.sleep(0.02)


def gid_index(dev, ip):
    """The index of ip's IPv4-mapped RoCEv2 GID in dev's table (sysfs)."""
    a = socket.inet_aton(ip)
    want = "0000:0000:0000:0000:0000:ffff:" + f"{a[0]:02x}{a[1]:02x}:{a[2]:02x}{a[3]:02x}"
    d = f"/sys/class/infiniband/{dev}/ports/1"
    seen = []
    for i in range(16):
        try:
            with open(f"{d}/gids/{i}") as f:
                g = f.read().strip()
            with open(f"{d}/gid_attrs/types/{i}") as f:
                t = f.read().strip()
        except OSError:
            continue
        seen.append(f"{i}={g}/{t}")
        if g == want and t == "RoCE v2":
            return i
    raise RuntimeError(f"no RoCE v2 GID {want}: {' '.join(seen)}")


def shapes(eth_ip_udp, hdrs, rest):
    """(name, iovecs, copied) for one frame: eth_ip_udp + hdrs (the RoCE
    headers) + rest (payload, pad, ICRC)."""
    f = eth_ip_udp + hdrs + rest
    out = [("one fragment after Ethernet (as virtio-net)", [f[:14], f[14:]], False),
           ("one fragment after IP+UDP", [eth_ip_udp, hdrs + rest], False),
           ("one fragment after the RoCE headers", [eth_ip_udp + hdrs, rest], False)]
    if len(rest) > 8:
        cut = len(eth_ip_udp + hdrs) + 4
        out.append(("fragment starting inside the payload (copied)", [f[:cut], f[cut:]], True))
        mid = 14 + (len(f) - 14) // 2
        out.append(("two fragments (copied)", [f[:14], f[14:mid], f[mid:]], True))
    return out


def main():
    def bench_arg(ap):
        ap.add_argument("--bench", type=int, default=0, metavar="N",
                        help="instead of the checks: time N 1 KiB WRITEs in each shape (bench/icount/rx_frags.sh)")

    def go(a, tap):
        global BENCH
        BENCH = a.bench > 0
        (bench if a.bench else run)(a, tap, random.Random(4791))
    on_tap_device(go, bench_arg)


def where_did_they_go(a):
    """No frame written reached the device (rx_frags twice and xrc_switch
    once in loaded clean-clone runs on the debug kernel, not reproduced
    alone): print where they were seen -- the tap's counters, the
    namespace's IP and UDP counters and every RDMA device's counters."""
    st = f"/sys/class/net/{a.ifname}/statistics"
    tap = {}
    for n in ("rx_packets", "rx_dropped", "rx_errors", "tx_packets"):
        with open(f"{st}/{n}") as f:
            tap[n] = int(f.read())
    print(f"# {a.ifname}: {tap}")
    link = subprocess.run(["ip", "-s", "-s", "link", "show", "dev", a.ifname], capture_output=True, text=True)
    for line in link.stdout.splitlines():
        print(f"# {line.strip()}")
    with open("/proc/net/snmp") as f:
        snmp = [line.split() for line in f]
    for proto in ("Ip:", "Udp:"):
        rows = [r for r in snmp if r and r[0] == proto]
        if len(rows) == 2:
            print(f"# {proto} {dict(zip(rows[0][1:], rows[1][1:]))}")
    for dev in sorted(os.listdir("/sys/class/infiniband")):
        try:
            print(f"# {dev}: {counters(dev)}")
        except OSError:
            pass  # not an rroce device


def on_tap_device(run, more_args=None):
    """The main of a script whose peer is itself: parses --dev/--ifname
    (and what more_args(parser) adds), makes the tap device and the rroce
    device on it, calls run(args, tap), removes both and exits with the
    TAP summary."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--dev", default="rroce9")
    ap.add_argument("--ifname", default="rrtap0")
    if more_args:
        more_args(ap)
    a = ap.parse_args()
    tap = Tap(a.ifname)
    try:
        sh("rdma", "link", "add", a.dev, "type", "rroce", "netdev", a.ifname)
    except subprocess.CalledProcessError as ex:
        check(False, f"rdma link add {a.dev} on {a.ifname}", ex.stderr.decode().strip())
        tap.close()
        finish()
    before = counters(a.dev)
    try:
        run(a, tap)
    finally:
        if counters(a.dev)["rx_packets"] == before["rx_packets"]:
            where_did_they_go(a)
        subprocess.run(["rdma", "link", "delete", a.dev], capture_output=True)
        tap.close()
    finish()


def frames(tap, tmo):
    """(RoCE headers and payload after IP and UDP, ICRC right) of every
    RoCEv2 frame read from the tap within tmo seconds."""
    deadline = time.monotonic() + tmo
    while time.monotonic() < deadline:
        if not select.select([tap.fd], [], [], 0.05)[0]:
            continue
        try:
            f = os.read(tap.fd, 65536)
        except BlockingIOError:
            continue
        if len(f) < 14 + 28 + 12 or f[12:14] != b"\x08\x00" or f[23] != 17:
            continue
        ip = f[14:]
        if struct.unpack("!H", ip[22:24])[0] != ROCE:
            continue
        dgram = ip[:20 + struct.unpack("!H", ip[24:26])[0]]
        yield dgram[28:], icrc_check.icrc(dgram) == struct.unpack("<I", dgram[-4:])[0]


def roce_frames(tap, tmo):
    """As `frames`, those whose ICRC is right only (their RoCE part)."""
    return (roce for roce, ok in frames(tap, tmo) if ok)


def open_device(a):
    """The rroce device on the tap (its GID for ME appears shortly after
    the link), with that GID's index."""
    deadline = time.monotonic() + 10
    while True:
        d = None
        try:
            d = rclib.Dev(a.dev, 0)
            d.gid_index = gid_index(a.dev, ME)
            return d
        except Exception:  # noqa: BLE001 - the GID appears shortly after the link
            if d is not None:
                d.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def peer():
    """The script's end as an address for rclib.to_rtr."""
    b = socket.inet_aton(PEER)
    return type("Peer", (), {"gid": GID(f"0000:0000:0000:0000:0000:ffff:{b[:2].hex()}:{b[2:].hex()}"),
                             "gid_index": 0})


def connect(a):
    """The device, a CQ, a connected RC QP, two MRs."""
    d = open_device(a)
    cq = d.cq(64)
    qp = d.qp(cq, cq, recv_wr=32)
    size = 64 * 1024
    mr = d.mr(size)
    rbuf = d.mr(size)
    rclib.to_init(qp)
    rclib.to_rtr(qp, d, peer(), PEER_QPN, 1000, e.IBV_MTU_1024)
    rclib.to_rts(qp, 5000)
    return d, cq, qp, mr, rbuf


def bench(a, tap, rnd):
    """N WRITE_ONLY of 1 KiB, each written as one page fragment after the
    Ethernet header (the shape virtio-net delivers), in batches of N, each
    batch timed: under QEMU -icount the guest clock counts instructions, so
    the same run with an older rroce.ko (which linearised every skb) gives
    what reading in place saves.  Prints "# bench NS_PER_PACKET" per batch
    and the counters' change (rx_packets must be every packet)."""
    d, cq, qp, mr, rbuf = connect(a)
    payload = bytes(rnd.randrange(256) for _ in range(MTU))
    psn = 1000
    base = counters(a.dev)
    for batch in range(3):
        frames = []
        for i in range(a.bench):
            h = bth(WRITE_ONLY, qp.qp_num, psn + i, ackreq=int(i % 64 == 63)) + reth(mr.buf, mr.rkey, MTU)
            f = tap.frame(h + payload)
            frames.append([f[:14], f[14:]])
        t0 = time.perf_counter_ns()
        for segs in frames:
            os.writev(tap.fd, segs)
        t1 = time.perf_counter_ns()
        psn += a.bench
        print(f"# bench {(t1 - t0) / a.bench:.0f} ns per packet")
        while select.select([tap.fd], [], [], 0.2)[0]:
            try:
                os.read(tap.fd, 65536)
            except BlockingIOError:
                break
    dl = delta(base, counters(a.dev))
    print(f"# counters: {dl}")
    check(dl.get("rx_packets") == 3 * a.bench and mr.read(MTU, 0) == payload,
          f"bench: {3 * a.bench} WRITEs accepted, bytes placed", f"{dl}")
    qp.close()
    d.close()


def run(a, tap, rnd):
    d, cq, qp, mr, rbuf = connect(a)
    psn = 1000
    base = counters(a.dev)
    print(f"# {a.dev} on {a.ifname} (IFF_NAPI_FRAGS), QP {qp.qp_num:#x} connected to {PEER} QP {PEER_QPN:#x}")

    cases = [(kind, bytes(rnd.randrange(256) for _ in range(MTU))) for kind in ("WRITE", "SEND")]
    off = 0
    for kind, payload in cases:
        for i in range(5):
            if kind == "WRITE":
                va = mr.buf + off
                hdrs = bth(WRITE_ONLY, qp.qp_num, psn, ackreq=1) + reth(va, mr.rkey, len(payload))
            else:
                qp.post_recv(RecvWR(wr_id=psn, num_sge=1, sg=[SGE(rbuf.buf + off, len(payload), rbuf.lkey)]))
                hdrs = bth(SEND_ONLY, qp.qp_num, psn, ackreq=1)
            f = tap.frame(hdrs + payload)
            eth_ip_udp = f[:42]
            rest = f[42 + len(hdrs):]
            sname, segs, cp = shapes(eth_ip_udp, hdrs, rest)[i]
            b = counters(a.dev)
            tap.write(segs)
            ok, bad, naks = tap.acks(psn)
            want = {"rx_packets": 1}
            if cp:
                want["rx_linearized"] = 1
            dl = wait_delta(a.dev, b, want)
            if kind == "WRITE":
                got = mr.read(len(payload), off)
            else:
                wcs = rclib.poll(cq, 1, time.monotonic() + 5)
                wc_ok = len(wcs) == 1 and wcs[0].status == e.IBV_WC_SUCCESS and wcs[0].byte_len == len(payload)
                check(wc_ok, f"SEND {sname}: one receive completion of {len(payload)} bytes",
                      " ".join(rclib.wc_str(w) for w in wcs))
                got = rbuf.read(len(payload), off)
            check(got == payload, f"{kind} {sname}: the {len(payload)} bytes placed",
                  f"first difference at {rclib.first_diff(got, payload)}")
            check(ok and bad == 0 and naks == 0, f"{kind} {sname}: ACK of PSN {psn} with a correct ICRC",
                  f"found={ok} bad_icrc={bad} naks={naks}")
            check(dl == want, f"{kind} {sname}: counters {want}", f"got {dl}")
            psn += 1
            off += len(payload)

    # ---- in fragments: pad bytes, empty WRITE, a 3-packet WRITE ----
    for n in (1, 61, 1022, 0):
        payload = bytes(rnd.randrange(256) for _ in range(n))
        pad = (-n) & 3
        h = bth(WRITE_ONLY, qp.qp_num, psn, ackreq=1, pad=pad) + reth(mr.buf + off, mr.rkey, n)
        f = tap.frame(h + payload + b"\0" * pad)
        b = counters(a.dev)
        tap.write([f[:14], f[14:]])
        ok, bad, naks = tap.acks(psn)
        dl = wait_delta(a.dev, b, {"rx_packets": 1})
        check(mr.read(n, off) == payload if n else True, f"WRITE of {n} bytes (pad {pad}), one fragment: bytes placed")
        check(ok and bad == 0 and naks == 0 and dl == {"rx_packets": 1},
              f"WRITE of {n} bytes (pad {pad}): ACKed, nothing dropped or copied", f"ack={ok} naks={naks} {dl}")
        psn += 1
        off += max(n, 4)
    payload = bytes(rnd.randrange(256) for _ in range(3 * MTU))
    b = counters(a.dev)
    for i in range(3):
        op = WRITE_FIRST + i
        h = bth(op, qp.qp_num, psn + i, ackreq=int(i == 2))
        if i == 0:
            h += reth(mr.buf + off, mr.rkey, len(payload))
        f = tap.frame(h + payload[i * MTU:(i + 1) * MTU])
        tap.write([f[:14], f[14:]])
    ok, bad, naks = tap.acks(psn + 2)
    dl = wait_delta(a.dev, b, {"rx_packets": 3})
    check(mr.read(len(payload), off) == payload and ok and dl == {"rx_packets": 3},
          "WRITE FIRST/MIDDLE/LAST of 3 KiB in fragments: bytes placed, ACKed, nothing dropped or copied",
          f"ack={ok} {dl}")
    psn += 3
    off += len(payload)

    # ---- hostile, in fragments ----
    before = mr.read(MTU, off)
    h = bth(WRITE_ONLY, qp.qp_num, psn, ackreq=1) + reth(mr.buf + off, mr.rkey, MTU)
    f = tap.frame(h + b"\xAA" * MTU, bad_icrc=True)
    b = counters(a.dev)
    tap.write([f[:14], f[14:]])
    dl = wait_delta(a.dev, b, {"rx_icrc_errors": 1})
    check(dl == {"rx_icrc_errors": 1} and mr.read(MTU, off) == before,
          "wrong ICRC in the fragment: counted in rx_icrc_errors, memory untouched", f"{dl}")
    f = tap.frame(bth(WRITE_ONLY, qp.qp_num, psn, ackreq=1) + reth(mr.buf + off, mr.rkey, 0)[:8])
    b = counters(a.dev)
    tap.write([f[:14], f[14:]])
    dl = wait_delta(a.dev, b, {"rx_dropped": 1, "rx_linearized": 1})
    check(dl.get("rx_dropped") == 1 and "rx_packets" not in dl and mr.read(MTU, off) == before,
          "WRITE short of its RETH, in a fragment: rx_dropped", f"{dl}")
    # The QP still works: the PSN the bad packets had.
    h = bth(WRITE_ONLY, qp.qp_num, psn, ackreq=1) + reth(mr.buf + off, mr.rkey, 64)
    f = tap.frame(h + b"\x5A" * 64)
    tap.write([f[:14], f[14:]])
    ok, _, _ = tap.acks(psn)
    check(ok and mr.read(64, off) == b"\x5A" * 64, "the QP takes the next request after them")
    total = delta(base, counters(a.dev))
    print(f"# counters over the run: {total}")
    qp.close()
    d.close()


if __name__ == "__main__":
    main()
