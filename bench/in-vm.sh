#!/usr/bin/env bash
# Runs inside the VM (scripts/vm): perftest against rroce and rdma_rxe on the
# same veth, interleaved, BENCH_REPEATS times.  Saves every client log as
# $1/DRIVER.METRIC.ROUND.log (bench/report.py parses them).
#
# Topology per driver: loopback on one device on rr0 (rroce0, or rxe0 after
# rroce0 is deleted, since both want UDP 4791 in init_net), server and
# client in init_net: rxe has no netns support, so this is the one setup
# both drivers can run identically.
mkdir -p "$1" && out=$(realpath "$1")
. "$(dirname "$0")/../selftests/lib.sh"
mkdir -p "$out"
repeats=${BENCH_REPEATS:-3}
dur=${BENCH_DURATION:-3}
round=0
port=19000

use_rroce() {
	rdma link delete rxe0 2>/dev/null
	modprobe -r rdma_rxe 2>/dev/null
	ibdev_exists rroce0 || rdma link add rroce0 type rroce netdev rr0
	DEV=rroce0
}
use_rxe() {
	rdma link delete rroce0 2>/dev/null
	wait_for 10 bash -c '! ss -Hlun "sport = :4791" | grep -q .'
	modprobe rdma_rxe
	ibdev_exists rxe0 || rdma link add rxe0 type rxe netdev rr0
	DEV=rxe0
}

# run DRIVER TOOL METRIC-NAME ARGS...: one perftest pair, appends a result.
run() {
	local drv=$1 tool=$2 name=$3 idx val
	shift 3
	port=$((port + 1))
	idx=$(gid_index "$DEV" "$(gid_v4 "$IP0")")
	timeout 120 "$tool" -d "$DEV" -x "$idx" -p "$port" -F "$@" >/tmp/bs.log 2>&1 &
	local spid=$!
	wait_for 20 bash -c "ss -Hltn 'sport = :$port' | grep -q ." || { echo "# $drv $name: server did not start" >&2; kill $spid; return; }
	timeout 120 "$tool" -d "$DEV" -x "$idx" -p "$port" -F "$@" "$IP0" >/tmp/bc.log 2>&1
	wait $spid
	cp /tmp/bc.log "$out/$drv.$name.$round.log"
	grep -q '^ *[0-9]' /tmp/bc.log || { echo "# $drv $name: no result" >&2; tail -3 /tmp/bc.log >&2; }
}

suite() {
	local d=$1
	run "$d" ib_write_bw write_bw_64K -s 65536 -D "$dur"
	run "$d" ib_send_bw send_bw_64K -s 65536 -D "$dur"
	run "$d" ib_read_bw read_bw_64K -s 65536 -D "$dur"
	run "$d" ib_write_bw write_bw_64B -s 64 -D "$dur"
	run "$d" ib_send_lat send_lat_8B -s 8 -n 300
	run "$d" ib_write_lat write_lat_8B -s 8 -n 300
	run "$d" ib_read_lat read_lat_8B -s 8 -n 300
}

for round in $(seq "$repeats"); do
	echo "# round $round" >&2
	use_rroce; suite rroce
	use_rxe; suite rxe
done
use_rroce
