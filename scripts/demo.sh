#!/usr/bin/env bash
# `make run`: runs inside the VM (scripts/vm) once the standard topology is
# up, and shows the rroce devices at work with stock tools.
set -euo pipefail
banner() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

banner "rdma link show"
rdma link show
banner "ibv_devices (through librroce-rdmav34.so)"
ibv_devices
banner "ibv_devinfo -d rroce0"
ibv_devinfo -d rroce0
banner "GIDs of rroce0 (RoCE v2)"
# One grep over the 1024-entry table (a process per entry is slow in TCG).
grep -H . /sys/class/infiniband/rroce0/ports/1/gids/* |
	grep -v ':0000:0000:0000:0000:0000:0000:0000:0000$' |
	while IFS=: read -r path gid; do
		i=${path##*/}
		printf '  %-3s %s  %s\n' "$i" "$gid" "$(cat /sys/class/infiniband/rroce0/ports/1/gid_attrs/types/"$i")"
	done
banner "rroce1 lives on rr1 in netns 'peer'"
ip netns exec peer rdma link show rroce1/1
ip netns exec peer ss -uln 'sport = :4791'
banner "port state follows the netdev"
ip link set rr0 down
sleep 1
printf 'rr0 down -> rroce0 port: %s\n' "$(cat /sys/class/infiniband/rroce0/ports/1/state)"
ip link set rr0 up
for _ in $(seq 50); do
	grep -q ACTIVE /sys/class/infiniband/rroce0/ports/1/state && break
	sleep 0.1
done
printf 'rr0 up   -> rroce0 port: %s\n' "$(cat /sys/class/infiniband/rroce0/ports/1/state)"
echo
banner "a completion queue and a memory region through the provider"
/usr/bin/python3 - <<'PY'
from pyverbs.device import Context
from pyverbs.cq import CQ
from pyverbs.pd import PD
from pyverbs.mr import MR
import pyverbs.enums as e
ctx = Context(name="rroce0")
cq = CQ(ctx, 100)
mr = MR(PD(ctx), 1 << 20, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE)
print(f"  CQ depth {cq.cqe} (mapped ring, polled without syscalls: {cq.poll()[0]} entries)")
print(f"  MR 1 MiB pinned: lkey {mr.lkey:#x} rkey {mr.rkey:#x}")
PY
echo
echo "Queue pairs and the wire protocol are not wired into the kernel yet,"
echo "so ibv_rc_pingpong and perftest stop at QP creation; see README."
