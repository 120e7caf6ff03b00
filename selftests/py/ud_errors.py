#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""UD error handling (TAP checks).

Usage: ud_errors.py DEV0 GID0 DEV1 GID1.  UD QPs on DEV0 and DEV1:

  - a send with a bad lkey completes with LOC_PROT_ERR and the QP enters
    SQE (not ERR): sends posted behind it are flushed, receives go on;
    modify_qp(SQE -> RTS) resumes sending;
  - a datagram with the wrong Q_Key is dropped (no completion), the next
    with the right one is received;
  - an AH to an unroutable GID is refused; the QP keeps working.
"""
import os
import subprocess
import sys
import time

import pyverbs.enums as e
from pyverbs.addr import AH, AHAttr, GID, GlobalRoute
from pyverbs.qp import QPAttr
from pyverbs.wr import SGE, RecvWR, SendWR

import rclib
from rclib import Dev, poll, status_str, wc_str
from taplib import check, errno_of, finish

QKEY = 0x22222222
MSG = 256


def ud_qp(d, cq, qkey=QKEY):
    qp = d.qp(cq, cq, send_wr=32, recv_wr=32, qp_type=e.IBV_QPT_UD)
    a = QPAttr(qp_state=e.IBV_QPS_INIT, port_num=1)
    a.pkey_index = 0
    a.qkey = qkey
    qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_QKEY)
    qp.modify(QPAttr(qp_state=e.IBV_QPS_RTR), e.IBV_QP_STATE)
    a = QPAttr(qp_state=e.IBV_QPS_RTS)
    a.sq_psn = 0
    qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_SQ_PSN)
    return qp


def ah(src, dst_gid):
    gr = GlobalRoute(dgid=dst_gid, sgid_index=src.gid_index, hop_limit=64)
    return AH(src.pd, attr=AHAttr(gr=gr, is_global=1, port_num=1))


def main():
    d0 = Dev(sys.argv[1], int(sys.argv[2]))
    d1 = Dev(sys.argv[3], int(sys.argv[4]))
    cq0, cq1 = d0.cq(64), d1.cq(64)
    q0, q1 = ud_qp(d0, cq0), ud_qp(d1, cq1)
    m0, m1 = d0.mr(4096), d1.mr(4096)
    to1, to0 = ah(d0, d1.gid), ah(d1, d0.gid)

    def send(qp, cq, mr, to, dst_qpn, wr_id, lkey=None, qkey=QKEY, data=None):
        if data is not None:
            mr.write(data, len(data), 0)
        wr = SendWR(wr_id=wr_id, opcode=e.IBV_WR_SEND, num_sge=1,
                    sg=[SGE(mr.buf, MSG, mr.lkey if lkey is None else lkey)], send_flags=e.IBV_SEND_SIGNALED)
        wr.set_wr_ud(to, dst_qpn, qkey)
        qp.post_send(wr)

    def recv(qp, mr, wr_id):
        qp.post_recv(RecvWR(wr_id=wr_id, num_sge=1, sg=[SGE(mr.buf + 1024, MSG + 40, mr.lkey)]))

    # SQE on a local send error.
    send(q0, cq0, m0, to1, q1.qp_num, 1, lkey=m0.lkey ^ 0x7700)
    s = poll(cq0, 1, time.monotonic() + 20)
    check(len(s) == 1 and s[0].status == e.IBV_WC_LOC_PROT_ERR, "UD send with a bad lkey -> LOC_PROT_ERR",
          status_str(s[0].status) if s else "no completion")
    st = rclib.qp_state(q0)
    check(st == e.IBV_QPS_SQE, "the QP is in SQE (not ERR)", rclib.state_str(st))
    send(q0, cq0, m0, to1, q1.qp_num, 2)
    s = poll(cq0, 1, time.monotonic() + 20)
    check(len(s) == 1 and s[0].status == e.IBV_WC_WR_FLUSH_ERR and s[0].wr_id == 2, "a send posted in SQE is flushed",
          wc_str(s[0]) if s else "no completion")
    recv(q0, m0, 10)
    data = bytes(range(MSG))
    send(q1, cq1, m1, to0, q0.qp_num, 3, data=data)
    s = poll(cq1, 1, time.monotonic() + 20)
    r = poll(cq0, 1, time.monotonic() + 20)
    check(len(r) == 1 and r[0].status == 0 and r[0].byte_len == MSG + 40 and m0.read(MSG, 1024 + 40) == data,
          "receives go on in SQE (datagram received intact)", f"{[wc_str(w) for w in s + r]}")
    rc = errno_of(lambda: q0.modify(QPAttr(qp_state=e.IBV_QPS_RTS), e.IBV_QP_STATE))
    st = rclib.qp_state(q0)
    check(rc == 0 and st == e.IBV_QPS_RTS, "modify_qp SQE -> RTS", f"errno {rc}, {rclib.state_str(st)}")
    recv(q1, m1, 11)
    data = bytes((i * 3) & 0xFF for i in range(MSG))
    send(q0, cq0, m0, to1, q1.qp_num, 4, data=data)
    s = poll(cq0, 1, time.monotonic() + 20)
    r = poll(cq1, 1, time.monotonic() + 20)
    check(len(s) == 1 and s[0].status == 0 and len(r) == 1 and r[0].status == 0
          and m1.read(MSG, 1024 + 40) == data, "sending works again after RTS", f"{[wc_str(w) for w in s + r]}")
    # What a RoCE HCA reports of a received datagram, which UCX's ud_verbs
    # relies on: wc.sl holds the L3 header type (bit 3: UDP, i.e. RoCEv2;
    # 2 = IPv4, 1 = IPv6), and the GRH area holds the IP header -- for IPv4
    # in its last 20 bytes, so its last 4 are the destination address.
    if r:
        raw = lambda g: bytes.fromhex(str(g.gid if hasattr(g, "gid") else g).replace(":", ""))
        g0, g1 = raw(d0.gid), raw(d1.gid)
        v4 = g1[:12] == bytes(10) + b"\xff\xff"
        area = m1.read(40, 1024)
        if v4:
            ok = r[0].sl == 0xA and area[20] == 0x45 and area[32:36] == g0[12:] and area[36:40] == g1[12:]
        else:
            ok = r[0].sl == 0x9 and area[0] >> 4 == 6 and area[8:24] == g0 and area[24:40] == g1
        check(ok and r[0].wc_flags & e.IBV_WC_GRH,
              f"receive completion as a RoCE HCA reports it: sl 0x{0xA if v4 else 0x9:x} (RoCEv2 over IPv{4 if v4 else 6}), "
              "IP header in the GRH area", f"sl 0x{r[0].sl:x}, wc_flags 0x{r[0].wc_flags:x}, area {area.hex()}")

    # Wrong Q_Key: dropped without a completion.
    recv(q1, m1, 12)
    send(q0, cq0, m0, to1, q1.qp_num, 5, qkey=QKEY ^ 1, data=bytes(MSG))
    s = poll(cq0, 1, time.monotonic() + 20)
    time.sleep(0.5)
    n, _ = cq1.poll(1)
    check(len(s) == 1 and s[0].status == 0 and n == 0, "a datagram with the wrong Q_Key is dropped (no receive)")
    data = bytes((i * 5) & 0xFF for i in range(MSG))
    send(q0, cq0, m0, to1, q1.qp_num, 6, data=data)
    poll(cq0, 1, time.monotonic() + 20)
    r = poll(cq1, 1, time.monotonic() + 20)
    check(len(r) == 1 and r[0].wr_id == 12 and m1.read(MSG, 1024 + 40) == data,
          "the next datagram (right Q_Key) takes the receive", f"{[wc_str(w) for w in r]}")

    # AH to a GID no route leads to.
    bad = GID("0000:0000:0000:0000:0000:ffff:c633:6401")  # 198.51.100.1 (TEST-NET-2)
    rc = errno_of(lambda: ah(d0, bad))
    check(rc != 0, "AH to an unroutable GID is refused", f"errno {rc}")
    recv(q1, m1, 13)
    send(q0, cq0, m0, to1, q1.qp_num, 7, data=data)
    s = poll(cq0, 1, time.monotonic() + 20)
    r = poll(cq1, 1, time.monotonic() + 20)
    check(len(s) == 1 and s[0].status == 0 and len(r) == 1 and r[0].status == 0, "the QP still works")

    # In ERR, a receive posted is flushed at once.
    rc = errno_of(lambda: q1.modify(QPAttr(qp_state=e.IBV_QPS_ERR), e.IBV_QP_STATE))
    check(rc == 0, "modify_qp RTS -> ERR", f"errno {rc}")
    rc = errno_of(lambda: recv(q1, m1, 14))
    r = poll(cq1, 1, time.monotonic() + 20) if rc == 0 else []
    check(len(r) == 1 and r[0].wr_id == 14 and r[0].status == e.IBV_WC_WR_FLUSH_ERR,
          "a receive posted in ERR is flushed by itself", f"errno {rc}, {[wc_str(w) for w in r]}")
    if len(sys.argv) > 5 and sys.argv[5]:
        other_netdev_v6(sys.argv[1], int(sys.argv[5]))
    finish()


def other_netdev_v6(name, g6):
    """A datagram to an IPv6 address of another netdev of the namespace is
    not the device's own: until 2026-12-07 the address test matched any
    global IPv6 address of the namespace (ipv6_chk_addr, not strict), so
    it was delivered to the sending device's own QPs (and two rroce
    devices of one namespace could not reach each other over IPv6)."""
    sh = lambda c: subprocess.run(c, shell=True, capture_output=True, text=True)
    sh("ip link del rrx6a")
    r = sh("ip link add rrx6a type veth peer name rrx6b && ip addr add fd7a::1/64 dev rrx6a nodad && "
           "ip link set rrx6a up && ip link set rrx6b up")
    if r.returncode:
        check(False, "a veth with fd7a::1 in this namespace", r.stderr.strip())
        return
    try:
        d = Dev(name, g6)
        cq = d.cq(16)
        qa, qb = ud_qp(d, cq), ud_qp(d, cq)
        m = d.mr(4096)
        for i in range(2):
            qb.post_recv(RecvWR(wr_id=100 + i, num_sge=1, sg=[SGE(m.buf + 1024, MSG + 40, m.lkey)]))

        def send_to(gid, wr_id):
            wr = SendWR(wr_id=wr_id, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(m.buf, MSG, m.lkey)],
                        send_flags=e.IBV_SEND_SIGNALED)
            wr.set_wr_ud(ah(d, gid), qb.qp_num, QKEY)
            qa.post_send(wr)
            wait = 3 * int(os.environ.get("RROCE_TIMEOUT_SCALE", "1"))
            return [w for w in poll(cq, 2, time.monotonic() + wait) if w.wr_id in (wr_id, 100, 101)]

        got = send_to(GID("fd7a:0000:0000:0000:0000:0000:0000:0001"), 1)
        recvd = [w for w in got if w.wr_id >= 100]
        check(any(w.wr_id == 1 for w in got) and not recvd,
              f"{name}: a UD datagram to fd7a::1 (another netdev's address) does not come back to its own QP",
              f"{[wc_str(w) for w in got]}")
        got = send_to(d.gid, 2)
        recvd = [w for w in got if w.wr_id >= 100]
        check(len(recvd) == 1 and recvd[0].status == 0,
              f"{name}: one to its own IPv6 address {d.gid} does", f"{[wc_str(w) for w in got]}")
    finally:
        sh("ip link del rrx6a")


if __name__ == "__main__":
    main()
