#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Exit 0 if DEVICE accepts work on an RC queue pair, 4 (kselftest SKIP)
if the kernel does not take posted work yet (the doorbell command is not
implemented), 1 on any other failure.

Usage: has_datapath.py DEVICE GID_INDEX
"""
import errno
import sys

import pyverbs.enums as e
from pyverbs.addr import AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, SendWR

ctx = Context(name=sys.argv[1])
gid_index = int(sys.argv[2])
pd = PD(ctx)
cq = CQ(ctx, 16)
qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=QPCap(max_send_wr=4, max_recv_wr=4)))
a = QPAttr(qp_state=e.IBV_QPS_INIT)
a.port_num = 1
a.pkey_index = 0
a.qp_access_flags = e.IBV_ACCESS_LOCAL_WRITE
qp.to_init(a)
a = QPAttr(qp_state=e.IBV_QPS_RTR)
a.path_mtu = e.IBV_MTU_1024
a.dest_qp_num = qp.qp_num
a.ah_attr = AHAttr(gr=GlobalRoute(dgid=ctx.query_gid(1, gid_index), sgid_index=gid_index), is_global=1, port_num=1)
qp.to_rtr(a)
a = QPAttr(qp_state=e.IBV_QPS_RTS)
qp.to_rts(a)
mr = MR(pd, 64, e.IBV_ACCESS_LOCAL_WRITE)
try:
    qp.post_send(SendWR(opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(mr.buf, 8, mr.lkey)]))
except PyverbsRDMAError as ex:
    if ex.error_code in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
        print(f"kernel does not take posted work yet (errno {ex.error_code})")
        sys.exit(4)
    raise
sys.exit(0)
