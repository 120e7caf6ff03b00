#!/usr/bin/env bash
# The kernel data path in guest instructions: one VM booted with
# `scripts/vm --icount` (QEMU -icount shift=0,sleep=off: the guest's clocks
# and TSC advance one nanosecond per guest instruction), 1 vCPU, perftest
# with a fixed count from rroce0 to rroce1 over the veth pair (ICRC and IP
# stack on both ends; bench/icount/kernel-in-vm.sh).  perftest's rate,
# taken over its iterations in TSC cycles, becomes bytes per guest
# instruction: the whole machine's instructions per message (both ends'
# kernel, perftest's busy polling, the idle time to a timer's deadline if
# the data path waits on one), independent of the host's speed and load.
#
#   bench/icount/kernel.sh [BASE_REV] [ROUNDS]
#
# With BASE_REV, rroce.ko and the provider of that commit (bench/base.sh,
# against the same kernel) run in the same VM, in turn with the working
# tree's, and the report has new/old.  ROUNDS (default 2) repeats each run:
# the spread between rounds shows how deterministic it is.  Needs the plain
# kernel, rroce.ko and the provider built.  rdma_rxe is not measured here:
# it has no network-namespace support, so its two devices cannot sit on
# the two ends of the veth pair.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../scripts/lib.sh"
top=$RROCE_TOP
base_rev=${1:-}
rounds=${2:-2}
ko=${RROCE_KO:-$top/build/plain/rroce.ko}
[ -f "$ko" ] || die "$ko not built (scripts/module.sh plain)"
export RROCE_KO=$ko
genv=(env ICOUNT_ROUNDS="$rounds")
base_desc=
if [ -n "$base_rev" ]; then
	base_desc=$("$here/../base.sh" "$base_rev" | tail -1)
	genv+=(BENCH_BASE_KO="$top/build/bench-base/rroce.ko" BENCH_BASE_PROVIDER="$top/build/bench-base/librroce-rdmav34.so")
fi
out=$top/build/icount-kernel
rm -rf "$out"
mkdir -p "$out"
step "icount: one VM, 1 vCPU, $rounds rounds${base_desc:+, base $base_desc}"
"$top/scripts/vm" --kernel plain --cpus 1 --icount "${genv[@]}" "$here/kernel-in-vm.sh" "$out" ||
	echo "icount: the VM exited $?" >&2
/usr/bin/python3 "$here/kernel_report.py" "$out" "$(cd "$top" && git describe --always --dirty)" "$base_desc"
