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
. "$here/../lib.sh"
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
		atomic_bw_8B ib_atomic_bw -n 5000
	T
}

# use DRV: DRV's module and provider (bench_module), the two standard
# devices, and their RoCE v2 GID indexes G0 and G1
use() {
	bench_module "$1" && links_add || return 1
	wait_for 10 gid_index "$DEV0" "$(gid_v4 "$IP0")" >/dev/null &&
		wait_for 10 gid_index "$DEV1" "$(gid_v4 "$IP1")" >/dev/null || return 1
	G0=$(gid_index "$DEV0" "$(gid_v4 "$IP0")")
	G1=$(gid_index "$DEV1" "$(gid_v4 "$IP1")")
}

for round in $(seq "$rounds"); do
	# rroce and (with BENCH_BASE_KO) base, in an order that turns each round
	for drv in $(bench_drivers "$round"); do
		[ "$drv" = rxe ] && continue
		use "$drv" || { echo "# icount: cannot set up $drv" >&2; continue; }
		while read -r name tool args; do
			port=$((port + 1))
			echo "# [round $round] $drv $name" >&2
			# shellcheck disable=SC2086  # ARGS are several words
			pair_run 300 "$NS1" "" "$port" "$tool" -d "$DEV1" -x "$G1" -p "$port" -F $args -- \
				"$tool" -d "$DEV0" -x "$G0" -p "$port" -F $args "$IP1" >&2
			{ echo "# bench: $tool $args"; cat "$PAIR_CLI"; echo "# exit: $pair_crc"; } >"$out/$drv.$name.$round.log"
		done < <(tests)
	done
done
rm -f "$PAIR_SRV" "$PAIR_CLI"
# the ICRC CRC-32 each load timed (in guest instructions here) and used
dmesg | grep 'rroce: ICRC CRC-32' >&2
