#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""Regenerate the Scapy ICRC vectors used by src/icrc.rs (SCAPY_VECTORS).

Needs Scapy (pip install scapy); its contrib/roce.py computes the RoCEv2 ICRC
for IPv4 and IPv6 independently of rroce.  Prints `name length hex`.
"""
from scapy.all import IP, IPv6, IPOption, UDP, Raw, raw
from scapy.contrib.roce import BTH


def show(name, pkt):
    b = raw(pkt)
    print(name, len(b), b.hex())


# IPv6, RC RDMA WRITE ONLY: RETH + 13-byte payload + 3 pad; every masked field non-trivial.
reth = bytes.fromhex("00007f0012345678" "0badcafe" "0000000d")
show("v6_write_only",
     IPv6(tc=0xb8, fl=0x12345, hlim=37, src="fe80::1", dst="2001:db8::42")
     / UDP(sport=0xc123, dport=4791, chksum=0xbeef)
     / BTH(opcode=0x0a, solicited=0, migreq=1, padcount=3, pkey=0xffff, fecn=1, becn=0,
           dqpn=0x000abc, ackreq=1, psn=0xfffffe)
     / Raw(reth + bytes(range(1, 14)) + b"\0\0\0"))
# IPv6, RC ACKNOWLEDGE (AETH 0x1f, MSN 7), BECN set.
show("v6_ack",
     IPv6(tc=0x02, fl=0xfffff, hlim=1, src="2001:db8::1", dst="2001:db8::2")
     / UDP(sport=0xd000, dport=4791, chksum=0)
     / BTH(opcode=0x11, pkey=0xffff, becn=1, dqpn=0x12, psn=0x345678)
     / Raw(bytes.fromhex("1f000007")))
# IPv4 with a 4-byte option, RC SEND ONLY with 4 bytes of payload.
show("v4_opts_send_only",
     IP(tos=0x6a, ttl=9, id=7, flags="DF", src="10.0.0.1", dst="10.0.0.2",
        options=[IPOption(b"\x01\x01\x01\x00")])
     / UDP(sport=0xc001, dport=4791, chksum=0x1111)
     / BTH(opcode=0x04, pkey=0x8001, dqpn=0x11, ackreq=1, psn=5)
     / Raw(b"abcd"))
