#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""UD multicast: ibv_attach_mcast / ibv_detach_mcast (TAP checks).

Usage: mcast.py DEV0 GID0 DEV1 GID1 IGMP_CMD...  A UD QP on DEV0 sends to
QP 0xFFFFFF at a multicast GID; UD QPs on DEV1 attached to the group
receive every datagram (payload and GRH checked), detached ones nothing.
IGMP_CMD prints DEV1's IPv4 multicast memberships (/proc/net/igmp in its
namespace) to check that the first attach joins the IP group and the last
detach leaves it.
"""
import subprocess
import sys
import time

import pyverbs.enums as e
from pyverbs.addr import AH, AHAttr, GID, GlobalRoute
from pyverbs.qp import QPAttr
from pyverbs.wr import SGE, RecvWR, SendWR

from rclib import Dev, poll, wc_str
from taplib import check, errno_of, finish

QKEY = 0x11111111
GROUP_V4 = "239.77.1.2"
MSG = 512


def mgid_v4(addr):
    """The IPv4-mapped GID of addr, in pyverbs' GID notation."""
    b = bytes(10) + b"\xff\xff" + bytes(int(x) for x in addr.split("."))
    return GID(":".join(b[i:i + 2].hex() for i in range(0, 16, 2)))


def ud_qp(d, cq):
    qp = d.qp(cq, cq, send_wr=64, recv_wr=64, qp_type=e.IBV_QPT_UD)
    a = QPAttr(qp_state=e.IBV_QPS_INIT, port_num=1)
    a.pkey_index = 0
    a.qkey = QKEY
    qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_QKEY)
    qp.modify(QPAttr(qp_state=e.IBV_QPS_RTR), e.IBV_QP_STATE)
    a = QPAttr(qp_state=e.IBV_QPS_RTS)
    a.sq_psn = 0
    qp.modify(a, e.IBV_QP_STATE | e.IBV_QP_SQ_PSN)
    return qp


def igmp_has(group):
    """Whether /proc/net/igmp of DEV1's namespace lists group (hex, host order)."""
    out = subprocess.run(sys.argv[5:], capture_output=True, text=True).stdout
    want = "".join(f"{int(x):02X}" for x in reversed(group.split(".")))
    return want in out


def main():
    d0 = Dev(sys.argv[1], int(sys.argv[2]))
    d1 = Dev(sys.argv[3], int(sys.argv[4]))
    a = d1.dev_attr
    check(a.max_mcast_grp > 0 and a.max_mcast_qp_attach > 0,
          f"{d1.name} advertises multicast (max_mcast_grp {a.max_mcast_grp}, "
          f"max_mcast_qp_attach {a.max_mcast_qp_attach})")
    mgid = mgid_v4(GROUP_V4)

    cq0, cq1 = d0.cq(256), d1.cq(256)
    tx = ud_qp(d0, cq0)
    rx = [ud_qp(d1, cq1) for _ in range(3)]
    smr = d0.mr(MSG)
    rmrs = [d1.mr(64 * (MSG + 40)) for _ in rx]

    check(not igmp_has(GROUP_V4), f"{GROUP_V4} not joined before any attach")
    for q in rx[:2]:
        q.attach_mcast(mgid, 0)
    rc = errno_of(lambda: rx[0].attach_mcast(mgid, 0))
    check(rc == 0, "attaching the same QP twice is harmless", f"errno {rc}")
    check(igmp_has(GROUP_V4), f"attach joined {GROUP_V4} on {d1.name}'s netdev (/proc/net/igmp)")

    def post_recvs(n=8):
        for i, (q, m) in enumerate(zip(rx, rmrs)):
            for j in range(n):
                off = j * (MSG + 40)
                q.post_recv(RecvWR(wr_id=(i << 16) | j, num_sge=1, sg=[SGE(m.buf + off, MSG + 40, m.lkey)]))

    gr = GlobalRoute(dgid=mgid, sgid_index=d0.gid_index, hop_limit=8)
    ah = AH(d0.pd, attr=AHAttr(gr=gr, is_global=1, port_num=1))

    def send(n, seed):
        got = []
        for k in range(n):
            data = bytes(((seed + k) * 13 + i) & 0xFF for i in range(MSG))
            smr.write(data, MSG, 0)
            wr = SendWR(wr_id=k, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(smr.buf, MSG, smr.lkey)],
                        send_flags=e.IBV_SEND_SIGNALED)
            wr.set_wr_ud(ah, 0xFFFFFF, QKEY)
            tx.post_send(wr)
            s = poll(cq0, 1, time.monotonic() + 20)
            if not s or s[0].status != 0:
                return None, [wc_str(w) for w in s]
            got.append(data)
        return got, []

    post_recvs()
    sent, err = send(5, 1)
    check(sent is not None, "5 datagrams to QP 0xFFFFFF at the group sent", f"{err}")
    wcs = poll(cq1, 10, time.monotonic() + 20)
    time.sleep(0.3)
    n, extra = cq1.poll(16)
    wcs += extra[:n]
    per_qp = {q.qp_num: [] for q in rx}
    bad = []
    for w in wcs:
        i, j = w.wr_id >> 16, w.wr_id & 0xFFFF
        if w.status != 0 or w.byte_len != MSG + 40 or w.qp_num != rx[i].qp_num:
            bad.append(wc_str(w))
            continue
        buf = rmrs[i].read(MSG + 40, j * (MSG + 40))
        dst = ".".join(str(b) for b in buf[20 + 16:20 + 20])
        if dst != GROUP_V4:
            bad.append(f"GRH destination {dst}")
        per_qp[w.qp_num].append(buf[40:])
    ok = (not bad and per_qp[rx[0].qp_num] == sent and per_qp[rx[1].qp_num] == sent
          and not per_qp[rx[2].qp_num])
    check(ok, "both attached QPs receive every datagram intact and in order (GRH: IPv4 header to the group); "
          "the unattached QP nothing", f"bad {bad[:3]}, counts {[len(v) for v in per_qp.values()]}")

    rx[1].detach_mcast(mgid, 0)
    rc = errno_of(lambda: rx[1].detach_mcast(mgid, 0))
    check(rc == 22, "detaching a QP that is not attached -> EINVAL", f"errno {rc}")
    check(igmp_has(GROUP_V4), "the group stays joined while a QP is attached")
    sent, err = send(3, 50)
    wcs = poll(cq1, 3, time.monotonic() + 20)
    time.sleep(0.3)
    n, extra = cq1.poll(16)
    wcs += extra[:n]
    who = sorted({w.qp_num for w in wcs})
    check(sent is not None and len(wcs) == 3 and who == [rx[0].qp_num] and all(w.status == 0 for w in wcs),
          "after one detach only the QP still attached receives", f"{[wc_str(w) for w in wcs]}")
    rx[0].detach_mcast(mgid, 0)
    check(not igmp_has(GROUP_V4), "the last detach leaves the IP group")
    sent, err = send(2, 90)
    time.sleep(0.5)
    n, extra = cq1.poll(16)
    check(sent is not None and n == 0, "after the last detach nothing is received",
          f"{[wc_str(w) for w in extra[:n]]}")

    # Bad input.
    rc_cq = d1.cq(4)
    rcqp = d1.qp(rc_cq, rc_cq)
    rc = errno_of(lambda: rcqp.attach_mcast(mgid, 0))
    check(rc == 22, "attach of an RC QP -> EINVAL", f"errno {rc}")
    uni = GID(d1.gid.gid)
    rc = errno_of(lambda: rx[0].attach_mcast(uni, 0))
    check(rc == 22, "attach to a unicast GID -> EINVAL", f"errno {rc}")
    limit = a.max_mcast_qp_attach
    many = [ud_qp(d1, cq1) for _ in range(limit + 1)]
    errs = [errno_of(lambda q=q: q.attach_mcast(mgid, 0)) for q in many]
    check(errs[:limit] == [0] * limit and errs[limit] == 12,
          f"{limit} QPs attach to one group, one more -> ENOMEM", f"errnos {errs}")
    for q in many[:limit]:
        q.detach_mcast(mgid, 0)
    check(not igmp_has(GROUP_V4), "all detached: group left")
    # A QP destroyed while attached is forgotten (no delivery to a stale QPN).
    rx[2].attach_mcast(mgid, 0)
    rx[2].close()
    check(not igmp_has(GROUP_V4), "destroying the last attached QP leaves the group")
    finish()


if __name__ == "__main__":
    main()
