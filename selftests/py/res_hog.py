#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""One side of a resource-heavy RC load, meant to be killed (kill_reclaim.sh).

Usage: res_hog.py DEV GID NAME PEER DIR [--qps N] [--mr BYTES] [--chunk BYTES]
                  [--depth N]

Opens DEV, makes one PD, one CQ, one MR of --mr bytes (pinned by the
kernel, REMOTE_WRITE/READ), --qps RC QPs.  Writes DIR/NAME.json (GID, QP
numbers, PSNs, MR address and rkey), waits for DIR/PEER.json from the
other side (another process, usually on the other device in another
network namespace), connects QP i to the peer's QP i (retry_cnt 7, so a
vanished peer means endless retries, not an error), writes DIR/NAME.rts and
waits for DIR/PEER.rts.  Then it keeps every QP's send queue full of RDMA
WRITEs and READs of --chunk bytes against the peer's MR, forever, and
prints one line

    running pid=P qps=N mr=BYTES vmpin_kb=K completions=C

once both kinds of work request have completed on every QP, so the caller
knows traffic is in flight in both directions.  Data are not checked here
(rc_xfer.py does that); completions must be successful until the peer
dies (then they stop coming, the QPs retry).  Exits 1 on a setup failure.
"""
import argparse
import json
import os
import sys
import time

import pyverbs.enums as e
from pyverbs.addr import GID, AHAttr, GlobalRoute
from pyverbs.wr import SGE, SendWR

import rclib
from rclib import Dev, wc_str
from rc_xfer import size


def wait_file(path, tmo=60.0):
    end = time.monotonic() + tmo
    while not os.path.exists(path):
        if time.monotonic() > end:
            raise SystemExit(f"FAIL: {path} did not appear within {tmo} s")
        time.sleep(0.05)
    time.sleep(0.05)
    with open(path) as f:
        return f.read()


def write_file(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, path)


def vmpin_kb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmPin:"):
                return int(line.split()[1])
    return -1


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("dev")
    p.add_argument("gid", type=int)
    p.add_argument("name")
    p.add_argument("peer")
    p.add_argument("dir")
    p.add_argument("--qps", type=int, default=16)
    p.add_argument("--mr", type=size, default=size("64M"))
    p.add_argument("--chunk", type=size, default=size("64K"))
    p.add_argument("--depth", type=int, default=4)
    p.add_argument("--timeout", type=int, default=14)
    a = p.parse_args()
    if a.chunk * a.qps > a.mr:
        p.error("--mr must hold --qps chunks")

    d = Dev(a.dev, a.gid)
    cq = d.cq(a.qps * a.depth + 16)
    mr = d.mr(a.mr)
    qps = [d.qp(cq, cq, send_wr=a.depth, recv_wr=1) for _ in range(a.qps)]
    psns = [(os.getpid() * 7919 + i * 104729) & 0xFFFFFF for i in range(a.qps)]
    me = {"gid": str(d.gid), "qpns": [q.qp_num for q in qps], "psns": psns, "addr": mr.buf, "rkey": mr.rkey}
    write_file(os.path.join(a.dir, a.name + ".json"), json.dumps(me))
    peer = json.loads(wait_file(os.path.join(a.dir, a.peer + ".json")))
    if len(peer["qpns"]) != a.qps:
        raise SystemExit(f"FAIL: peer has {len(peer['qpns'])} QPs, want {a.qps}")
    mtu = d.active_mtu()
    dgid = GID(peer["gid"])
    for i, q in enumerate(qps):
        rclib.to_init(q)
        attr = rclib.qp_attr(e.IBV_QPS_RTR, path_mtu=mtu, dest_qp_num=peer["qpns"][i], rq_psn=peer["psns"][i],
                             max_dest_rd_atomic=16, min_rnr_timer=12,
                             ah_attr=AHAttr(gr=GlobalRoute(dgid=dgid, sgid_index=a.gid, hop_limit=64),
                                            is_global=1, port_num=1))
        q.modify(attr, rclib.MASK_RTR)
        rclib.to_rts(q, psns[i], timeout=a.timeout, retry_cnt=7, rnr_retry=7, max_rd_atomic=16)
    write_file(os.path.join(a.dir, a.name + ".rts"), "")
    wait_file(os.path.join(a.dir, a.peer + ".rts"))

    # QP i owns [i * slot, (i + 1) * slot) of both MRs.
    slot = a.mr // a.qps
    per = max(1, slot // a.chunk)
    outstanding = [0] * a.qps
    seq = [0] * a.qps
    seen = [set() for _ in range(a.qps)]
    by_qpn = {q.qp_num: i for i, q in enumerate(qps)}
    completions = 0
    announced = False
    while True:
        for i, q in enumerate(qps):
            while outstanding[i] < a.depth:
                n = seq[i]
                seq[i] += 1
                off = i * slot + (n % per) * a.chunk
                opc = e.IBV_WR_RDMA_WRITE if n % 2 == 0 else e.IBV_WR_RDMA_READ
                wr = SendWR(wr_id=(i << 32) | (n & 0xFFFFFFFF), opcode=opc, num_sge=1,
                            sg=[SGE(mr.buf + off, a.chunk, mr.lkey)], send_flags=e.IBV_SEND_SIGNALED)
                wr.set_wr_rdma(peer["rkey"], peer["addr"] + off)
                q.post_send(wr)
                outstanding[i] += 1
        n, wcs = cq.poll(64)
        if not n:
            time.sleep(0.001)
            continue
        for wc in wcs[:n]:
            if wc.status != e.IBV_WC_SUCCESS:
                print(f"FAIL: error completion: {wc_str(wc)}", flush=True)
                sys.exit(1)
            i = by_qpn.get(wc.qp_num)
            if i is None:
                print(f"FAIL: completion for an unknown QP: {wc_str(wc)}", flush=True)
                sys.exit(1)
            outstanding[i] -= 1
            seen[i].add(wc.opcode)
            completions += 1
        if not announced and all(len(s) == 2 for s in seen):
            announced = True
            print(f"running pid={os.getpid()} qps={a.qps} mr={a.mr} vmpin_kb={vmpin_kb()} "
                  f"completions={completions}", flush=True)


if __name__ == "__main__":
    main()
