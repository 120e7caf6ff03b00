#!/usr/bin/env bash
# What reading a received packet in place saves against linearising it, in
# guest instructions (QEMU -icount: the guest clock counts them), for the
# shape virtio-net delivers: selftests/py/rx_frags.py --bench N in a 1-vCPU
# VM writes 3 batches of N RC WRITEs of 1 KiB into a tap device with
# IFF_NAPI_FRAGS, each as the Ethernet header then one page fragment, and
# prints the guest nanoseconds (instructions) per packet of each batch;
# with BASE_REV the same runs on rroce.ko of that commit in the same VM.
#   bench/icount/rx_frags.sh [BASE_REV [N]]   (N default 2000)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
if [ "${RROCE_IN_VM:-}" = 1 ]; then
	. "$top/selftests/lib.sh"
	. "$top/bench/lib.sh"
	for drv in rroce ${BENCH_BASE_KO:+base}; do
		bench_module "$drv" || { echo "# $drv: cannot load" >&2; continue; }
		echo "# module: $drv"
		/usr/bin/python3 -u "$top/selftests/py/rx_frags.py" --bench "$1" || true
		links_del_all
		rmmod rroce
	done
	exit 0
fi
base_rev=${1:-} n=${2:-2000}
genv=()
if [ -n "$base_rev" ]; then
	"$here/../base.sh" "$base_rev" | tail -1 >&2
	genv+=(BENCH_BASE_KO="$top/build/bench-base/rroce.ko" BENCH_BASE_PROVIDER="$top/build/bench-base/librroce-rdmav34.so")
fi
exec "$top/scripts/vm" --kernel plain --cpus 1 --icount RROCE_IN_VM=1 "${genv[@]}" "$0" "$n"
