#!/usr/bin/env bash
# Runs inside an --icount VM (bench/icount/kernel.sh): fixed-count perftest
# runs from rroce0 (rr0) to rroce1 (rr1, netns peer) over the veth pair, so
# both ends go through the IP stack and the ICRC, for each rroce module
# (the working tree's; with BENCH_BASE_KO the older one too), in turn,
# ICOUNT_ROUNDS times.  Saves each client log as $1/DRV.NAME.ROUND.log.
set -u
mkdir -p "$1" && out=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../../selftests/lib.sh"
rounds=${ICOUNT_ROUNDS:-2}
port=18500

# the runs: NAME TOOL ARGS (a fixed count: perftest's rate is taken over
# the iterations only, so setup and teardown stay out of it)
tests() {
	cat <<-'T'
		write_bw_64B ib_write_bw -s 64 -n 20000
		write_bw_4K ib_write_bw -s 4096 -n 3000
		write_bw_64K ib_write_bw -s 65536 -n 300
		read_bw_64B ib_read_bw -s 64 -n 5000
		read_bw_64K ib_read_bw -s 65536 -n 300
		send_bw_64K ib_send_bw -s 65536 -n 300
	T
}

# use DRV: load DRV's module and provider (rroce: the working tree's; base:
# BENCH_BASE_KO / BENCH_BASE_PROVIDER) and add the two standard devices
loaded=
use() {
	local ko=$RROCE_KO prov=$RROCE_PROVIDER
	[ "$1" = base ] && ko=$BENCH_BASE_KO prov=$BENCH_BASE_PROVIDER
	if [ "$loaded" != "$ko" ]; then
		links_del_all
		[ -d /sys/module/rroce ] && { rmmod rroce || return 1; }
		insmod "$ko" || return 1
		loaded=$ko
	fi
	echo "driver ${prov%-rdmav34.so}" >/etc/libibverbs.d/rroce.driver || return 1
	links_add || return 1
	wait_for 10 port_active "$DEV0" && wait_for 10 port_active "$DEV1" || return 1
	wait_for 10 gid_index "$DEV0" "$(gid_v4 "$IP0")" >/dev/null || return 1
	G0=$(gid_index "$DEV0" "$(gid_v4 "$IP0")")
	G1=$(ns "$NS1" bash -c ". $here/../../selftests/lib.sh; wait_for 10 gid_index $DEV1 $(gid_v4 "$IP1") >/dev/null; gid_index $DEV1 $(gid_v4 "$IP1")")
}

drivers=(rroce)
[ -n "${BENCH_BASE_KO:-}" ] && drivers+=(base)
for round in $(seq "$rounds"); do
	# the order turns each round
	[ $((round % 2)) = 0 ] && [ ${#drivers[@]} = 2 ] && order=(base rroce) || order=("${drivers[@]}")
	for drv in "${order[@]}"; do
		use "$drv" || { echo "# icount: cannot set up $drv" >&2; continue; }
		while read -r name tool args; do
			port=$((port + 1))
			echo "# [round $round] $drv $name" >&2
			# shellcheck disable=SC2086  # ARGS are several words
			ns "$NS1" timeout 300 "$tool" -d "$DEV1" -x "$G1" -p "$port" -F $args >/tmp/ic-srv.log 2>&1 &
			wait_for 20 bash -c ". $here/../../selftests/lib.sh; ns $NS1 ss -Hltn 'sport = :$port' | grep -q ." ||
				echo "# $drv $name: the server did not start" >&2
			# shellcheck disable=SC2086
			{ echo "# bench: $tool $args"; timeout 300 "$tool" -d "$DEV0" -x "$G0" -p "$port" -F $args "$IP1"; echo "# exit: $?"; } \
				>"$out/$drv.$name.$round.log" 2>&1
			wait
		done < <(tests)
	done
done
