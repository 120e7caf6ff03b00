#!/usr/bin/env bash
# `make bench`: rroce against rdma_rxe (and TCP) with perftest, in VMs.
#
#   bench/run.sh [--quick] [--setups "pair loopback"] [--repeats N] [--cpus N]
#                [--base REV]
#
#   pair      the headline: two VMs (scripts/vm-pair) joined by virtio-net:
#             rroce0<->rroce0, rxe0<->rxe0, then iperf3 TCP and the UDP
#             baseline (bench/udp_baseline.c) on the same link, at MTU 1500
#             and, for a subset, 9000 (bench/pair.sh, bench/lib.sh).
#             1 vCPU each (--cpus N to change), not pinned
#             (BENCH_PIN=1 pins them to host CPUs 0 and 1): on the 2-core
#             machine this was faster and steadier than 2 vCPUs each or
#             pinning.
#   loopback  one VM (2 vCPUs): server and client on one device on the veth
#             end rr0 (bench/in-vm.sh).  Unequal: rroce's same-device
#             shortcut skips the IP stack and the ICRC, rdma_rxe does both.
# In both, rroce and rdma_rxe are interleaved: every round runs all tests on
# one, then on the other (which goes first alternates).
# Full mode (default): both setups, the two-VM one first, BENCH_REPEATS=5
# rounds; the two-VM setup runs all metrics of bench/lib.sh (write sweep
# 2 B ... 8 MiB, post list 16, 4 QPs, bidirectional, latency p50/p99),
# the loopback one a few.  Time: about 70 minutes on the 2-core TCG host
# (an estimate from the runs of 2026-12-01, both with other VMs on the
# host: two VMs, -D 5, ~10.5 s per perftest run, 5 x 48 runs + iperf3 +
# driver switches ~46 min; loopback ~15 s per run, 5 x 14 runs ~19 min;
# ~3 min of VM boots).  The "seconds" of meta.json say what it took.
# --quick (or QUICK=1): loopback only, 3 rounds of write/read/send_bw
# 64 KiB, write_bw 64 B (message rate) and write_lat 8 B, shorter runs
# (-D 3); with --setups pair the same on two VMs (about 10 minutes).
# --base REV (make bench BASE=REV): a before/after in the same run: rroce.ko
# and the provider of commit REV (built by bench/base.sh against the same
# kernel) run as a third driver, "base", interleaved with the working
# tree's and rdma_rxe; the report adds a table rroce/base.
# BENCH_ONLY=REGEX runs only the tests whose names match (e.g. 'write_bw_.*').
# BENCH_LAT_ITERS=N: round trips of each latency run (default 300).
# The host is looked at (bench/host_state.py) at the start, every half
# minute and at the end: other QEMU processes or CPU load not ours make the
# report say "machine not idle".
# Then bench/report.py prints the tables and writes
# bench/results/DATE.json and bench/results/DATE.png.  Needs rroce.ko and
# the provider built (the Makefile's bench target does that first).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../scripts/lib.sh"
top=$RROCE_TOP

case ${QUICK:-0} in 1|y|yes|true) quick=1 ;; *) quick=0 ;; esac
setups= repeats= cpus_pair=1 cpus_loop=2 base_rev=${BASE:-}
while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=1; shift ;;
	--setups) setups=$2; shift 2 ;;
	--repeats) repeats=$2; shift 2 ;;
	--cpus) cpus_pair=$2; shift 2 ;;
	--base) base_rev=$2; shift 2 ;;
	-h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument $1" ;;
	esac
done
if [ "$quick" = 1 ]; then
	suite=quick duration=3 margin=1
	: "${setups:=loopback}" "${repeats:=${BENCH_REPEATS:-3}}"
else
	suite=full duration=5 margin=1
	: "${setups:=pair loopback}" "${repeats:=${BENCH_REPEATS:-5}}"
fi

# the UDP baseline's program (bench/udp_baseline.c), for the two-VM guests
mkdir -p "$top/build/bench"
cc -O2 -Wall -Wextra -Wno-missing-field-initializers -o "$top/build/bench/udp_baseline" "$here/udp_baseline.c" ||
	die "cannot build bench/udp_baseline.c"

ko=${RROCE_KO:-$top/build/plain/rroce.ko}
[ -f "$ko" ] || die "$ko not built (scripts/module.sh plain)"
[ -f "$top/build/lib/librroce-rdmav34.so" ] || die "provider not built (scripts/provider.sh)"
export RROCE_KO=$ko
base_env=()
if [ -n "$base_rev" ]; then
	base_desc=$("$here/base.sh" "$base_rev" | tail -1)
	base_env=(BENCH_BASE_KO=$top/build/bench-base/rroce.ko BENCH_BASE_PROVIDER=$top/build/bench-base/librroce-rdmav34.so
		BENCH_BASE_REV=$base_desc)
fi

logs=$top/build/bench-logs
results=$top/bench/results
date=$(date +%Y-%m-%d)
mkdir -p "$logs" "$results"
rm -rf "$logs/loopback" "$logs/pair" "$logs/pair-vms" "$logs"/*.log "$logs/meta.json"

# Other QEMU processes and other CPU load (not ours) compete for the 2 host
# cores: look at the host now, every half minute and at the end.
/usr/bin/python3 "$here/host_state.py" $$ >"$logs/host-start.json"
(while :; do /usr/bin/python3 "$here/host_state.py" --line $$; sleep 28; done) >"$logs/others.txt" &
sampler=$!
trap 'kill $sampler 2>/dev/null || true' EXIT

genv=(env BENCH_SUITE=$suite BENCH_REPEATS=$repeats BENCH_DURATION=$duration BENCH_MARGIN=$margin
	BENCH_ONLY=${BENCH_ONLY:-} BENCH_TCP=${BENCH_TCP:-1} BENCH_LAT_ITERS=${BENCH_LAT_ITERS:-300} "${base_env[@]}")
t_start=$(date +%s)
# the tree measured (recorded now: it may change while the bench runs)
git_rev=$(cd "$top" && git describe --always --dirty 2>/dev/null || echo unknown)
declare -A took
for s in $setups; do
	t0=$(date +%s)
	case $s in
	loopback)
		step "bench: loopback, one VM, $repeats rounds ($suite)"
		"$top/scripts/vm" --kernel plain --cpus "$cpus_loop" "${genv[@]}" "$here/in-vm.sh" "$logs/loopback" ||
			echo "bench: the loopback VM exited $?" >&2
		;;
	pair)
		step "bench: two VMs over virtio-net, $cpus_pair vCPU each, $repeats rounds ($suite)"
		pin=()
		[ "${BENCH_PIN:-0}" = 1 ] && pin=(--pin)
		RROCE_NO_LINKS=1 "$top/scripts/vm-pair" --kernel plain --cpus "$cpus_pair" --logs "$logs/pair-vms" "${pin[@]}" \
			"${genv[@]}" "$here/pair.sh" "$logs/pair" -- "${genv[@]}" "$here/pair.sh" "$logs/pair" ||
			echo "bench: the two-VM run exited $?" >&2
		;;
	*) die "unknown setup $s (loopback, pair)" ;;
	esac
	took[$s]=$(($(date +%s) - t0))
	done_step
done
kill $sampler 2>/dev/null || true
/usr/bin/python3 "$here/host_state.py" $$ >"$logs/host-end.json"

# The guests' CPU times add up only if the kernel accounts interrupt time
# (bench/lib.sh); report.py fails CPU samples that do not add up otherwise.
irqtime=False
grep -qx CONFIG_IRQ_TIME_ACCOUNTING=y "$RROCE_CACHE/build-plain/.config" 2>/dev/null && irqtime=True

# What the report needs to say how this was measured.
/usr/bin/python3 - "$logs/meta.json" <<EOF
import json, sys
s = [l.split() for l in open("$logs/others.txt") if len(l.split()) == 4]
o, c = [int(x[1]) for x in s], [float(x[2]) for x in s]
json.dump({
    "date": "$date", "mode": "$suite", "setups": "$setups".split(), "repeats": $repeats,
    "perftest_duration_s": $duration, "perftest_margin_s": $margin,
    "vcpus": {"loopback": $cpus_loop, "pair": $cpus_pair}, "pair_pinned": ${BENCH_PIN:-0} == 1,
    "seconds": {$(for s in $setups; do printf '"%s": %s, ' "$s" "${took[$s]}"; done) "total": $(($(date +%s) - t_start))},
    "host_cpus": $(nproc), "host": "$(uname -r)",
    "git": "$git_rev", "only": "${BENCH_ONLY:-}", "base": "${base_desc:-}",
    "lat_iters": ${BENCH_LAT_ITERS:-300},
    "irq_time_accounting": $irqtime,
    "other_qemu_max": max(o) if o else 0,
    "other_qemu_mean": round(sum(o) / len(o), 2) if o else 0,
    "other_cpu_pct_max": max(c) if c else 0,
    "other_cpu_pct_mean": round(sum(c) / len(c), 1) if c else 0,
    "host_start": json.load(open("$logs/host-start.json")),
    "host_end": json.load(open("$logs/host-end.json")),
}, open(sys.argv[1], "w"), indent=1)
EOF
/usr/bin/python3 "$here/report.py" "$logs" "$results/$date.json" --png "$results/$date.png"
