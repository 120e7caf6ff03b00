#!/usr/bin/env bash
# Runs inside the VM (scripts/vm): perftest against rroce and rdma_rxe on the
# same netdev, interleaved, BENCH_REPEATS times; then (full suite) iperf3
# over the same address.  Saves every client log as $1/DRV.NAME.ROUND.log
# and the CPU time around each run as $1/DRV.NAME.ROUND.cpu (bench/lib.sh
# has the list of tests; bench/report.py reads the files).  A perftest log
# starts with "# bench: CMD" and ends with "# exit: STATUS".
#
# Topology per driver: loopback on one device on rr0 (rroce0, or rxe0 after
# rroce0 is deleted, since both want UDP 4791 in init_net), server and
# client in init_net: rxe has no netns support, so this is the one setup
# both drivers can run identically in one VM.  Server and client share the
# guest, so the CPU time is that of both ends together.  Not a fair
# comparison: rroce's same-device shortcut skips the IP stack and the ICRC,
# rdma_rxe goes through both (the two-VM setup, bench/pair.sh, is fair).
mkdir -p "$1" && out=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../selftests/lib.sh"
BENCH_SETUP=loopback
. "$here/lib.sh"
repeats=${BENCH_REPEATS:-5}
round=0
port=19000

# run DRIVER NAME TOOL ARGS...: one server/client pair on $DEV, on $IP0
run() {
	local drv=$1 name=$2 tool=$3 idx=$GIDX spid crc src
	shift 3
	stamp "$drv $name"
	port=$((port + 1))
	cpu_mark
	timeout "$BENCH_TMO" "$tool" -d "$DEV" -x "$idx" -p "$port" -F "$@" >/tmp/bs.log 2>&1 &
	spid=$!
	wait_for 20 bash -c "ss -Hltn 'sport = :$port' | grep -q ." || { echo "# $drv $name: server did not start" >&2; kill $spid; return; }
	timeout "$BENCH_TMO" "$tool" -d "$DEV" -x "$idx" -p "$port" -F "$@" "$IP0" >/tmp/bc.log 2>&1
	crc=$?
	wait $spid
	src=$?
	cpu_write "$out/$drv.$name.$round.cpu" both
	{ echo "# bench: $tool $*"; cat /tmp/bc.log; echo "# exit: $crc"; } >"$out/$drv.$name.$round.log"
	{ echo "# bench: $tool $*"; cat /tmp/bs.log; echo "# exit: $src"; } >"$out/$drv.$name.$round.srv.log"
	is_result /tmp/bc.log || { echo "# $drv $name: no result" >&2; tail -3 /tmp/bc.log >&2; }
}

# tcp NAME LEN: iperf3 over $IP0 (the loopback reference)
tcp() {
	local name=$1 len=$2 spid
	stamp "tcp $name"
	port=$((port + 1))
	cpu_mark
	timeout "$BENCH_TMO" iperf3 -s -1 -p "$port" >/tmp/ts.log 2>&1 &
	spid=$!
	wait_for 20 bash -c "ss -Hltn 'sport = :$port' | grep -q ." || { echo "# tcp $name: server did not start" >&2; kill $spid; return; }
	timeout "$BENCH_TMO" iperf3 -c "$IP0" -p "$port" -l "$len" -t $((BENCH_DURATION - 2 * BENCH_MARGIN)) \
		-O "$BENCH_MARGIN" -J >/tmp/tc.log 2>&1
	wait $spid
	cpu_write "$out/tcp.$name.$round.cpu" both
	cp /tmp/tc.log "$out/tcp.$name.$round.log"
	is_result /tmp/tc.log || { echo "# tcp $name: no result" >&2; tail -3 /tmp/tc.log >&2; }
}

suite() {
	local d=$1 name tool args
	while read -r name tool args; do
		# shellcheck disable=SC2086  # ARGS are several words
		run "$d" "$name" "$tool" $args
	done < <(bench_tests)
}

# the drivers' order turns each round (bench_drivers: rroce, rdma_rxe and
# with --base the older rroce)
for round in $(seq "$repeats"); do
	echo "# loopback round $round/$repeats" >&2
	for drv in $(bench_drivers "$round"); do
		bench_use "$drv" "$IF0" "$IP0" && suite "$drv"
	done
	while read -r name len; do tcp "$name" "$len"; done < <(tcp_tests)
done
bench_use rroce "$IF0" "$IP0"
tsc_check "$out"
