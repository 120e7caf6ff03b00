#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Recompute the ICRC of every RoCEv2 packet in a pcap file.

Usage: icrc_check.py --selftest
       icrc_check.py FILE.pcap [--min-v4 N] [--min-v6 N] [--port 4791]

The ICRC (IBTA Annex A17) is CRC-32/IEEE (zlib's crc32) over 8 bytes of
0xFF, the IP header with its variant fields set to ones (IPv4: TOS, TTL,
header checksum; IPv6: traffic class, flow label, hop limit), the UDP
header with the checksum set to ones, the BTH with byte 4 (FECN, BECN,
resv6a) set to ones, and everything after it up to the ICRC; it is stored
little-endian in the last 4 bytes of the UDP payload.

--selftest checks this implementation against known answers: a CNP captured
from a ConnectX-4 Lx and Scapy's contrib.roce vectors (IPv4, IPv4 with
options, IPv6); the same vectors as drivers/infiniband/sw/rroce/proto/src/
icrc.rs and /work/shared/vectors/icrc_kat.py.  It also checks that the
masked fields do not change the result and that every other byte does.

With a pcap (classic libpcap format, Ethernet link type, microsecond or
nanosecond, either byte order; optional 802.1Q tags) every UDP packet to or
from the RoCE port is checked, plus the layout: IP and UDP lengths agree,
BTH transport version 0.  Prints counts per IP version and BTH opcode, and
every bad packet (up to 20).  Exit 0 if all are good and at least
--min-v4/--min-v6 (default 1 in total) were seen; 1 otherwise.
"""
import argparse
import collections
import struct
import sys
import zlib

ROCE_PORT = 4791

OPNAMES = {
    0x00: "SEND_FIRST", 0x01: "SEND_MIDDLE", 0x02: "SEND_LAST", 0x03: "SEND_LAST_IMM", 0x04: "SEND_ONLY",
    0x05: "SEND_ONLY_IMM", 0x06: "WRITE_FIRST", 0x07: "WRITE_MIDDLE", 0x08: "WRITE_LAST",
    0x09: "WRITE_LAST_IMM", 0x0A: "WRITE_ONLY", 0x0B: "WRITE_ONLY_IMM", 0x0C: "READ_REQUEST",
    0x0D: "READ_RESP_FIRST", 0x0E: "READ_RESP_MIDDLE", 0x0F: "READ_RESP_LAST", 0x10: "READ_RESP_ONLY",
    0x11: "ACK", 0x12: "ATOMIC_ACK", 0x13: "CMP_SWAP", 0x14: "FETCH_ADD", 0x16: "SEND_LAST_INV",
    0x17: "SEND_ONLY_INV", 0x81: "CNP",
}


class Bad(Exception):
    pass


def ip_layout(ip):
    """(ip header length, udp offset, end of the UDP datagram) of an IP
    packet carrying UDP; raises Bad."""
    if len(ip) < 1:
        raise Bad("empty")
    ver = ip[0] >> 4
    if ver == 4:
        ihl = (ip[0] & 0x0F) * 4
        if ihl < 20 or len(ip) < ihl + 8:
            raise Bad(f"IPv4 header length {ihl} / packet {len(ip)}")
        if ip[9] != 17:
            raise Bad("not UDP")
        tot = struct.unpack_from("!H", ip, 2)[0]
        if tot > len(ip):
            raise Bad(f"IPv4 total length {tot} beyond the captured {len(ip)} bytes")
    elif ver == 6:
        ihl = 40
        if len(ip) < 48:
            raise Bad("short IPv6")
        if ip[6] != 17:
            raise Bad("IPv6 next header is not UDP (extension headers are not expected)")
        tot = 40 + struct.unpack_from("!H", ip, 4)[0]
        if tot > len(ip):
            raise Bad(f"IPv6 payload length {tot - 40} beyond the captured bytes")
    else:
        raise Bad(f"IP version {ver}")
    ulen = struct.unpack_from("!H", ip, ihl + 4)[0]
    if ulen < 8 + 12 + 4:
        raise Bad(f"UDP length {ulen} too short for BTH + ICRC")
    if ihl + ulen != tot:
        raise Bad(f"UDP length {ulen} + IP header {ihl} != IP length {tot}")
    return ihl, ihl + 8, ihl + ulen


def icrc(ip):
    """The ICRC value (an int; wire bytes are its little-endian encoding)
    of an IP datagram whose UDP payload is BTH ... ICRC."""
    ihl, roce, end = ip_layout(ip)
    m = bytearray(ip[:end - 4])
    if m[0] >> 4 == 4:
        m[1] = 0xFF  # TOS (DSCP + ECN)
        m[8] = 0xFF  # TTL
        m[10] = m[11] = 0xFF  # header checksum
    else:
        m[0] |= 0x0F  # traffic class, high nibble
        m[1] = m[2] = m[3] = 0xFF  # traffic class low nibble, flow label
        m[7] = 0xFF  # hop limit
    m[ihl + 6] = m[ihl + 7] = 0xFF  # UDP checksum
    m[roce + 4] = 0xFF  # BTH FECN, BECN, resv6a
    return zlib.crc32(b"\xff" * 8 + bytes(m)) & 0xFFFFFFFF


def stored_icrc(ip):
    _, _, end = ip_layout(ip)
    return struct.unpack_from("<I", ip, end - 4)[0]


# ----------------------------------------------------------- known answers
KAT_CNP_FRAME = """e41d 2dab 2bc2 7cfe 9064 3b32 0800 45c2
003c 718c 4000 4011 9161 0a00 1101 0a00
1201 0000 12b7 0028 0000 8100 ffff 4000
0118 0000 0000 0000 0000 0000 0000 0000
0000 0000 0000 82fd 002a"""

SCAPY_VECTORS = {
    "v6_write_only":
        "6b81234500381125fe80000000000000000000000000000120010db8000000000000000000000042"
        "c12312b70038beef0a70ffff80000abc80fffffe00007f00123456780badcafe0000000d0102030405"
        "060708090a0b0c0d000000c1a89c14",
    "v6_ack":
        "602fffff001c110120010db800000000000000000000000120010db800000000000000000000000"
        "2d00012b7001c00001100ffff40000012003456781f000007cb8704ad",
    "v4_opts_send_only":
        "466a00340007400009115a450a0000010a00000201010100c00112b7001c1111040080010000001180"
        "000005616263644e8cfbaf",
}


def kat_uc_send_only():
    """Scapy's roce.uts UC SEND_ONLY example; on-wire ICRC 78 f3 53 f3."""
    def ipv4(total_len, tos, ident, ttl, src, dst, csum):
        return struct.pack("!BBHHHBBH4s4s", 0x45, tos, total_len, ident, 0x4000, ttl, 17, csum,
                           bytes(map(int, src.split("."))), bytes(map(int, dst.split("."))))
    payload = b"F0\x81\x8b\xe2\x895\xd9\x0e\x9a\x95PT\x01\xbe\x88^P\x00\x00"
    bth = struct.pack("!BBHII", 0x24, 0x60, 0xFFFF, 211, 13571856)
    udp = struct.pack("!HHHH", 49152, 4791, 44, 0xACA2)
    return ipv4(64, 0x01, 1144, 64, "192.168.0.7", "192.168.0.7", 0xB4D5) + udp + bth + payload + \
        bytes.fromhex("78f353f3")


def selftest():
    fails = 0
    vecs = {"cnp_connectx4": bytes.fromhex("".join(KAT_CNP_FRAME.split()))[14:],
            "uc_send_only_scapy": kat_uc_send_only()}
    vecs.update({k: bytes.fromhex(v) for k, v in SCAPY_VECTORS.items()})
    for name, p in vecs.items():
        v = icrc(p)
        ok = struct.pack("<I", v) == p[-4:] and stored_icrc(p) == v
        print(f"{'ok' if ok else 'not ok'} - KAT {name}: computed {struct.pack('<I', v).hex()}, "
              f"wire {p[-4:].hex()}")
        fails += not ok
        # Masked fields must not matter, every other covered bit must.
        ihl, roce, end = ip_layout(p)
        if p[0] >> 4 == 4:
            masked = {1: 0xFF, 8: 0xFF, 10: 0xFF, 11: 0xFF}
        else:
            masked = {0: 0x0F, 1: 0xFF, 2: 0xFF, 3: 0xFF, 7: 0xFF}
        masked.update({ihl + 6: 0xFF, ihl + 7: 0xFF, roce + 4: 0xFF})
        # Length, version and protocol bits change the layout: skipped.
        layout = {0: 0xF0, 2: 0xFF, 3: 0xFF, 9: 0xFF} if p[0] >> 4 == 4 else {0: 0xF0, 4: 0xFF, 5: 0xFF, 6: 0xFF}
        layout.update({ihl + 4: 0xFF, ihl + 5: 0xFF})
        if p[0] >> 4 == 4:
            layout[0] = 0xFF  # IHL too
        wrong = []
        for i in range(end - 4):
            for bit in range(8):
                if layout.get(i, 0) & (1 << bit):
                    continue
                q = bytearray(p)
                q[i] ^= 1 << bit
                same = icrc(bytes(q)) == v
                if same != bool(masked.get(i, 0) & (1 << bit)):
                    wrong.append((i, bit))
        ok = not wrong
        print(f"{'ok' if ok else 'not ok'} - KAT {name}: exactly the masked bits leave the ICRC unchanged"
              + (f" # wrong at (byte, bit) {wrong[:6]}" if wrong else ""))
        fails += not ok
    return fails


# ----------------------------------------------------------------- pcap
def pcap_frames(path):
    """Yield (index, caplen, origlen, frame bytes) of a classic pcap file
    with Ethernet link type."""
    with open(path, "rb") as f:
        hdr = f.read(24)
        if len(hdr) < 24:
            raise SystemExit(f"{path}: not a pcap file (too short)")
        magic = hdr[:4]
        if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
            end = "<"
        elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
            end = ">"
        elif magic == b"\x0a\x0d\x0d\x0a":
            raise SystemExit(f"{path}: pcapng, not classic pcap (capture with -F pcap)")
        else:
            raise SystemExit(f"{path}: not a pcap file (magic {magic.hex()})")
        linktype = struct.unpack(end + "I", hdr[20:24])[0] & 0x0FFFFFFF
        if linktype != 1:
            raise SystemExit(f"{path}: link type {linktype}, only Ethernet (1) is handled")
        i = 0
        while True:
            rec = f.read(16)
            if not rec:
                return
            if len(rec) < 16:
                raise SystemExit(f"{path}: truncated record header after frame {i}")
            _, _, caplen, origlen = struct.unpack(end + "IIII", rec)
            data = f.read(caplen)
            if len(data) < caplen:
                raise SystemExit(f"{path}: truncated frame {i + 1}")
            i += 1
            yield i, caplen, origlen, data


def check_pcap(path, port, min_v4, min_v6):
    counts = collections.Counter()
    opcodes = collections.Counter()
    bad = []
    for idx, caplen, origlen, fr in pcap_frames(path):
        off = 12
        etype = struct.unpack_from("!H", fr, off)[0] if len(fr) >= 14 else 0
        while etype in (0x8100, 0x88A8) and len(fr) >= off + 6:
            off += 4
            etype = struct.unpack_from("!H", fr, off)[0]
        ip = fr[off + 2:]
        if etype == 0x0800 and len(ip) >= 20 and ip[9] == 17:
            ihl = (ip[0] & 0x0F) * 4
            ver = "v4"
        elif etype == 0x86DD and len(ip) >= 40 and ip[6] == 17:
            ihl = 40
            ver = "v6"
        else:
            continue
        if len(ip) < ihl + 8:
            continue
        sport, dport = struct.unpack_from("!HH", ip, ihl)
        if port not in (sport, dport):
            continue
        counts[ver] += 1
        if caplen < origlen:
            bad.append(f"frame {idx}: truncated capture ({caplen} of {origlen} bytes)")
            continue
        try:
            _, roce, _ = ip_layout(ip)
            opc = ip[roce]
            opcodes[OPNAMES.get(opc, f"0x{opc:02x}")] += 1
            if ip[roce + 1] & 0x0F:
                raise Bad(f"BTH transport version {ip[roce + 1] & 0x0F}")
            want = icrc(ip)
            got = stored_icrc(ip)
            if want != got:
                psn = struct.unpack_from("!I", ip, roce + 8)[0] & 0xFFFFFF
                qpn = struct.unpack_from("!I", ip, roce + 4)[0] & 0xFFFFFF
                raise Bad(f"ICRC {struct.pack('<I', got).hex()} on the wire, {struct.pack('<I', want).hex()} "
                          f"computed (IP{ver} opcode 0x{opc:02x} qpn {qpn} psn {psn:#x})")
        except Bad as ex:
            bad.append(f"frame {idx}: {ex}")
    total = counts["v4"] + counts["v6"]
    print(f"# {path}: {total} RoCEv2 packets (UDP port {port}): {counts['v4']} IPv4, {counts['v6']} IPv6; "
          f"{total - len(bad)} with a correct ICRC, {len(bad)} bad")
    print("# opcodes: " + ", ".join(f"{k} {v}" for k, v in sorted(opcodes.items())))
    for b in bad[:20]:
        print(f"# BAD {b}")
    ok = True
    if bad:
        print(f"not ok - {len(bad)} packet(s) with a wrong ICRC or layout")
        ok = False
    if total == 0 or counts["v4"] < min_v4 or counts["v6"] < min_v6:
        print(f"not ok - too few packets: need at least {max(min_v4, 1) if not min_v6 else min_v4} IPv4 and "
              f"{min_v6} IPv6")
        ok = False
    if ok:
        print(f"ok - every ICRC of {total} packets is correct")
    return ok


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("pcap", nargs="?")
    p.add_argument("--selftest", action="store_true")
    p.add_argument("--port", type=int, default=ROCE_PORT)
    p.add_argument("--min-v4", type=int, default=0)
    p.add_argument("--min-v6", type=int, default=0)
    a = p.parse_args()
    if a.selftest:
        sys.exit(1 if selftest() else 0)
    if not a.pcap:
        p.error("a pcap file or --selftest")
    sys.exit(0 if check_pcap(a.pcap, a.port, a.min_v4, a.min_v6) else 1)


if __name__ == "__main__":
    main()
