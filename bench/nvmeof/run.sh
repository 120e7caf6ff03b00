#!/usr/bin/env bash
# NVMe over Fabrics (RDMA) between two VMs: rroce against rdma_rxe (and,
# with --base REV, the rroce.ko of commit REV), interleaved rounds, fio
# IOPS per pattern and queue depth (bench/nvmeof/guest.sh).  A kernel
# consumer's view of the data path: nvme-rdma chains a fast registration
# (IB_WR_REG_MR) before each command SEND, the target answers READs with
# RDMA WRITEs and a SEND_WITH_INV.
#
#   bench/nvmeof/run.sh [--rounds N] [--base REV]
#
# Needs the plain kernel and rroce.ko (make module), fio (make deps).  Each
# run boots a fresh pair of VMs (1 vCPU each; scripts/vm-pair).  Prints a
# table: median (min-max) IOPS over the rounds and rroce's ratios; a run
# without a figure is listed as a failure and left out of the medians.
# Logs: build/nvmeof/DRV.ROUND.log.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../scripts/lib.sh"
top=$RROCE_TOP
rounds=3 base=
while [ $# -gt 0 ]; do
	case $1 in
	--rounds) rounds=${2:?}; shift 2 ;;
	--base) base=${2:?}; shift 2 ;;
	*) die "usage: bench/nvmeof/run.sh [--rounds N] [--base REV]" ;;
	esac
done
ko=${RROCE_KO:-$top/build/plain/rroce.ko}
[ -f "$ko" ] || die "$ko not built (make module)"
command -v fio >/dev/null || die "fio is not installed (make deps)"
drivers=(rroce rxe)
if [ -n "$base" ]; then
	"$top/bench/base.sh" "$base" >/dev/null
	drivers+=(base)
fi
out=$top/build/nvmeof
rm -rf "$out"
mkdir -p "$out"
n=${#drivers[@]}
for round in $(seq "$rounds"); do
	for i in $(seq 0 $((n - 1))); do
		drv=${drivers[$(((i + round - 1) % n))]}
		env=(RROCE_KO="$ko")
		case $drv in
		rxe) env+=(RROCE_TYPE=rxe) ;;
		base) env=(RROCE_KO="$top/build/bench-base/rroce.ko") ;;
		esac
		step "nvmeof: round $round of $rounds, $drv"
		env "${env[@]}" timeout 900 "$top/scripts/vm-pair" "$here/guest.sh" -- "$here/guest.sh" \
			>"$out/$drv.$round.log" 2>&1 || echo "nvmeof: $drv round $round: the VMs exited $?" >&2
		grep -a '^a| NVMEOF' "$out/$drv.$round.log" | sed 's/^a| //' || echo "nvmeof: $drv round $round: no result" >&2
		done_step
	done
done
/usr/bin/python3 - "$out" "${drivers[@]}" <<'PY'
import re, statistics, sys, pathlib
out = pathlib.Path(sys.argv[1]); drivers = sys.argv[2:]
res, fails, keys = {}, [], []
for f in sorted(out.glob("*.log")):
    drv, rnd = f.stem.split(".")
    for line in f.read_text(errors="replace").splitlines():
        m = re.match(r"a\| NVMEOF (\S+) qd (\d+) (.*)", line)
        if not m:
            continue
        k = (m.group(1), int(m.group(2)))
        if k not in keys:
            keys.append(k)
        v = re.match(r"iops (\d+) clat_us", m.group(3))
        if v and int(v.group(1)) > 0:
            res.setdefault((drv, k), []).append(int(v.group(1)))
        else:
            fails.append(f"{drv} round {rnd} {k[0]} qd {k[1]}: {m.group(3)}")
def cell(v):
    return f"{statistics.median(v):.0f} ({min(v)}-{max(v)}, n={len(v)})" if v else "-"
hdr = ["pattern", "qd"] + drivers + [f"rroce/{d}" for d in drivers if d != "rroce"]
print("| " + " | ".join(hdr) + " |")
print("|" + "---|" * len(hdr))
for k in sorted(keys):
    row = [k[0], str(k[1])] + [cell(res.get((d, k), [])) for d in drivers]
    for d in drivers:
        if d == "rroce":
            continue
        a, b = res.get(("rroce", k)), res.get((d, k))
        row.append(f"{statistics.median(a) / statistics.median(b):.2f}x" if a and b else "-")
    print("| " + " | ".join(row) + " |")
print(f"failed runs: {len(fails)}")
for f in fails:
    print("  " + f)
PY
