#!/usr/bin/env bash
# Runs in each guest of scripts/vm-pair (under scripts/vm-pair-guest): the
# two-VM benchmark.  Guest a is the server side, guest b the client side;
# both walk the same list of runs in the same order:
#   for each round: rroce (all tests of bench/lib.sh), rdma_rxe (the same)
#   and with --base the older rroce, in an order that turns each round
#   (bench_drivers), then iperf3 TCP and the UDP baseline (a flood and a
#   ping-pong) on the same link
#   (full suite); the tests named *_mtu9000 with the link at MTU 9000.
# Each guest has one RDMA device at a time, on its link NIC pair0 (rroce0 or
# rxe0: rdma_rxe lives in init_net, so this is fair to both).  Run number N
# uses TCP port 19000+N, so a client can only meet the server of the same
# run; the client retries until that server listens (the two guests switch
# drivers at slightly different times).
#
#   bench/pair.sh OUTDIR
#
# Files in OUTDIR (shared by both guests through 9p): DRV.NAME.ROUND.log
# (client output, as bench/in-vm.sh), DRV.NAME.ROUND.cpu (client CPU time),
# DRV.NAME.ROUND.srv.{log,cpu} (the server's).
mkdir -p "$1" && out=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../selftests/lib.sh"
BENCH_SETUP=pair
. "$here/lib.sh"
repeats=${BENCH_REPEATS:-5}
role=${RROCE_PAIR_ROLE:?run me through scripts/vm-pair}
nd=${RROCE_PAIR_IF:-pair0}
# the CPU time of every run is divided by the bytes on this link (bench/lib.sh)
BENCH_NIC=$nd
me=$RROCE_PAIR_IP
peer=$RROCE_PAIR_PEER_IP
seq=0
round=0
# built on the host by bench/run.sh (the guests have no compiler of their own
# to spare the time for)
udp_baseline=$here/../build/bench/udp_baseline

# Kept trying while the server of this run is not there yet.
not_yet='t connect|unable to init the socket|connection refused|unable to connect to server'

# client FILE CMD...: run CMD (a client) until it gets past connecting, at
# most BENCH_TMO+60 s (the server gives up on a run after BENCH_TMO); CPU
# time around the last attempt.  FILE starts with "# bench: CMD" and ends
# with "# exit: STATUS".
client() {
	local f=$1 end=$((SECONDS + BENCH_TMO + 60)) rc t0
	shift
	while :; do
		cpu_mark
		t0=$SECONDS
		{ echo "# bench: $*"; timeout "$BENCH_TMO" "$@"; rc=$?; echo "# exit: $rc"; } >"$f" 2>&1
		is_result "$f" && return $rc
		# a quick refusal: the server is not listening yet (iperf3 -J
		# exits 0 then)
		if [ $((SECONDS - t0)) -lt 20 ] && grep -qiE "$not_yet" "$f" && [ $SECONDS -lt $end ]; then
			sleep 0.5
			continue
		fi
		return $rc
	done
}

# one DRV NAME TOOL ARGS...: run number $seq of this guest's side, on the
# link at the MTU of NAME (bench_mtu: both guests switch before their side
# of the run, and a client only meets the server of its own run)
one() {
	local drv=$1 name=$2 tool=$3 port=$((19000 + seq)) idx base
	shift 3
	base=$out/$drv.$name.$round
	set_mtu "$nd" "$(bench_mtu "$name")" || { echo "# $name: cannot set the MTU of $nd" >&2; return 0; }
	stamp "$drv $name"
	if [ "$drv" = udp ]; then
		# udp_lat_*: the ping-pong; udp_bw_*: the flood
		local srv=(sink "$port" "$((BENCH_TMO - 5))")
		local cli=(flood "$peer" "$port" "$1" "$((BENCH_DURATION - 2 * BENCH_MARGIN))")
		if [ "${name#udp_lat_}" != "$name" ]; then
			srv=(echo "$port" "$((BENCH_TMO - 5))")
			cli=(pingpong "$peer" "$port" "$1" "$BENCH_LAT_ITERS")
		fi
		if [ "$role" = a ]; then
			cpu_mark
			timeout "$BENCH_TMO" "$udp_baseline" "${srv[@]}" >"$base.srv.log" 2>&1
			cpu_write "$base.srv.cpu" server
		else
			client "$base.log" "$udp_baseline" "${cli[@]}"
			cpu_write "$base.cpu" client
		fi
	elif [ "$drv" = tcp ]; then
		if [ "$role" = a ]; then
			cpu_mark
			timeout "$BENCH_TMO" iperf3 -s -1 -p "$port" >"$base.srv.log" 2>&1
			cpu_write "$base.srv.cpu" server
		else
			client "$base.log" iperf3 -c "$peer" -p "$port" -l "$1" \
				-t $((BENCH_DURATION - 2 * BENCH_MARGIN)) -O "$BENCH_MARGIN" -J
			cpu_write "$base.cpu" client
		fi
	else
		idx=$GIDX
		hwc_mark
		if [ "$role" = a ]; then
			cpu_mark
			{
				echo "# bench: $tool $*"
				timeout "$BENCH_TMO" "$tool" -d "$DEV" -x "$idx" -p "$port" -F "$@"
				echo "# exit: $?"
			} >"$base.srv.log" 2>&1
			cpu_write "$base.srv.cpu" server
		else
			client "$base.log" "$tool" -d "$DEV" -x "$idx" -p "$port" -F "$@" "$peer"
			cpu_write "$base.cpu" client
		fi
		hwc_write "$base.$role.hwc"
	fi
	[ "$role" = b ] && ! is_result "$base.log" &&
		{ echo "# $drv $name round $round: no result" >&2; tail -3 "$base.log" >&2; }
	return 0
}

# hwc_mark, hwc_write FILE: the changes of $DEV's hw_counters (rroce's; the
# names rdma_rxe has, for rxe0) between the two calls, one "NAME DELTA"
# per line into FILE: retransmissions, drops, copies on receive behind a
# figure (not read by the report)
hwc_mark() { _hwc0=$(grep -H . "$SYS_IB/$DEV"/ports/1/hw_counters/* 2>/dev/null); }
hwc_write() {
	grep -H . "$SYS_IB/$DEV"/ports/1/hw_counters/* 2>/dev/null |
		awk -F: 'NR == FNR {a[$1] = $2; next} {n = $1; sub(".*/", "", n); if ($2 != a[$1]) print n, $2 - a[$1]}' \
			<(printf '%s\n' "$_hwc0") - >"$1"
}

suite() {
	local d=$1 name tool args
	while read -r name tool args; do
		seq=$((seq + 1))
		# shellcheck disable=SC2086  # ARGS are several words
		one "$d" "$name" "$tool" $args
	done < <(bench_tests)
}

for round in $(seq "$repeats"); do
	echo "# two VMs ($role) round $round/$repeats" >&2
	for drv in $(bench_drivers "$round"); do
		if bench_use "$drv" "$nd" "$me"; then
			suite "$drv"
		else
			echo "# $drv: no device on $nd" >&2
			seq=$((seq + $(bench_tests | wc -l)))
		fi
	done
	while read -r name len; do
		seq=$((seq + 1))
		one "${name%%_*}" "$name" - "$len"
	done < <(tcp_tests)
done
set_mtu "$nd" 1500
tsc_check "$out"
