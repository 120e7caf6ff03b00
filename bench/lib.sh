# Guest-side helpers of the benchmark (sourced by bench/in-vm.sh and
# bench/pair.sh, after selftests/lib.sh).
# shellcheck shell=bash
#
# What is measured (BENCH_SUITE; BENCH_SETUP is pair or loopback):
#   full, pair (the headline; the full run's time goes here)
#          ib_write_bw over 2 B ... 8 MiB (2 B, powers of 4 from 16 B to
#          4 MiB, 8 MiB); ib_read_bw and ib_send_bw at 64 B, 64 KiB, 1 MiB;
#          (-D, or a fixed count: see bw_cmd; the 64 B runs give the
#          message rate); ib_write_bw 64 B with a post list of 16 (-l 16)
#          and with 4 QPs (-q 4); bidirectional ib_write_bw 64 KiB (-b);
#          ib_{write,send,read}_lat 8 B (-n BENCH_LAT_ITERS: p50 =
#          t_typical, and p99); ib_read_bw and ib_send_bw 64 KiB with
#          perftest waiting on completion events (-e, *_events) instead
#          of busy-polling; iperf3 TCP -l 64 KiB and 1 MiB and the UDP
#          baseline (bench/udp_baseline.c: datagrams of a RoCE packet's size,
#          1040 B, and a 40 B ping-pong for the latency) (BENCH_TCP=1).  Then the same link at MTU 9000 (RoCE
#          MTU 4096; tests named *_mtu9000): ib_write_bw 64 KiB and 1 MiB,
#          ib_read_bw and ib_send_bw 64 KiB, iperf3 TCP 64 KiB and the UDP
#          baseline with 4112 B datagrams.
#   full, loopback (unequal, see bench/in-vm.sh: a few metrics only)
#          write/read/send_bw 64 KiB, write_bw 64 B, write/send/read_lat
#          8 B; iperf3 -l 64 KiB.
#   quick  write/read/send_bw 64 KiB, write_bw 64 B, write_lat 8 B.
# Every run leaves in $BENCH_OUT: DRV.NAME.ROUND.log (the client's output,
# what bench/report.py parses; its first line "# bench: CMD" is the
# command) and DRV.NAME.ROUND.cpu ("kern_s user_s wall_s ncpu side idle_s
# [tx_bytes rx_bytes]": CPU seconds of this guest in system+softirq+irq, in
# user+nice and in idle+iowait, from /proc/stat, and wall seconds, around
# the run; with BENCH_NIC set (two VMs: the link NIC), the bytes that NIC
# sent and received over the same interval, which is what the report
# divides the CPU time by).

# stamp WHAT: progress line on stderr, seconds since the start
_bench_t0=$(date +%s)
stamp() { echo "# [$(($(date +%s) - _bench_t0))s] $*" >&2; }

BENCH_SUITE=${BENCH_SUITE:-full}
BENCH_DURATION=${BENCH_DURATION:-5}    # perftest -D (seconds)
BENCH_MARGIN=${BENCH_MARGIN:-1}        # perftest --margin: measured window is D - 2*margin
BENCH_LAT_ITERS=${BENCH_LAT_ITERS:-300}
BENCH_TMO=${BENCH_TMO:-120}            # one perftest/iperf3 side is killed after this

# bench_tests: "NAME TOOL ARGS..." lines, in run order (only the names
# matching the extended regex BENCH_ONLY, if set).
bench_tests() { _bench_tests | _only; }
tcp_tests() { _tcp_tests | _only; }
_only() { if [ -n "${BENCH_ONLY:-}" ]; then grep -E "^($BENCH_ONLY) "; else cat; fi; }
_bench_tests() {
	local op s
	if [ "$BENCH_SUITE" = quick ] || [ "${BENCH_SETUP:-}" != pair ]; then
		for op in write read send; do
			echo "${op}_bw_64K $(bw_cmd "$op" 65536)"
		done
		echo "write_bw_64B $(bw_cmd write 64)"
		for op in write send read; do
			echo "${op}_lat_8B ib_${op}_lat -s 8 -n $BENCH_LAT_ITERS"
			[ "$BENCH_SUITE" = quick ] && break
		done
		return 0
	fi
	for s in 2 16 64 256 1024 4096 16384 65536 262144 1048576 4194304 8388608; do
		echo "write_bw_$(size_label "$s") $(bw_cmd write "$s")"
	done
	for op in read send; do
		for s in 64 65536 1048576; do
			echo "${op}_bw_$(size_label "$s") $(bw_cmd "$op" "$s")"
		done
	done
	echo "write_bw_64B_l16 $(bw_cmd write 64) -l 16"
	echo "write_bw_64B_q4 $(bw_cmd write 64) -q 4"
	echo "write_bw_64K_bidir $(bw_cmd write 65536) -b"
	for op in write send read; do
		echo "${op}_lat_8B ib_${op}_lat -s 8 -n $BENCH_LAT_ITERS"
	done
	# perftest sleeping on completion events (-e) instead of busy-polling
	# its CQ: with one vCPU the poller competes with the part of a driver
	# that runs as a task (rdma_rxe's kworkers), not with softirq work.
	# perftest offers -e for READ and SEND only, and not with -D: fixed
	# counts (188 and 62.5 MiB).
	echo "read_bw_64K_events ib_read_bw -s 65536 -n 3000 -e"
	echo "send_bw_64K_events ib_send_bw -s 65536 -n 1000 -e"
	# jumbo frames last: one MTU switch per driver and round (bench_mtu)
	echo "write_bw_64K_mtu9000 $(bw_cmd write 65536)"
	echo "write_bw_1M_mtu9000 $(bw_cmd write 1048576)"
	echo "read_bw_64K_mtu9000 $(bw_cmd read 65536)"
	echo "send_bw_64K_mtu9000 $(bw_cmd send 65536)"
}

# bench_mtu NAME: the link MTU test NAME runs at (its name ends in _mtuN,
# else 1500)
bench_mtu() {
	case $1 in
	*_mtu[0-9]*) echo "${1##*_mtu}" ;;
	*) echo 1500 ;;
	esac
}

# set_mtu NETDEV MTU: NETDEV's MTU is MTU (changed only if it is not).
# rroce's active MTU follows at once, rdma_rxe's through its netdev
# notifier; the RoCE MTU is the largest of 256...4096 that fits with the
# headers (1024 at 1500, 4096 at 9000).
set_mtu() {
	[ "$(cat "/sys/class/net/$1/mtu" 2>/dev/null)" = "$2" ] && return 0
	stamp "mtu $2 on $1"
	ip link set "$1" mtu "$2"
}

# roce_frame MTU: the UDP payload of a full-size middle RoCE packet on a
# link of MTU MTU (BTH 12 + the RoCE MTU's payload + ICRC 4): the datagram
# size of the UDP baseline.  The RoCE MTU as rroce picks it (selftests/lib.sh
# roce_mtu; rdma_rxe picks the same at 1500 and 9000).
roce_frame() { echo $((12 + $(roce_mtu "$1") + 4)); }

# bw_cmd OP SIZE: the perftest command line of a bandwidth run.  WRITE and
# READ run for a duration (-D); ib_send_bw's client reports 0 MB/s in
# duration mode now and then (perftest 4.5, seen with rxe and rroce), so
# SEND runs a fixed count, and so do messages of 4 MiB and more (at a few
# MB/s only a message or two complete in the -D window): 12 MiB, at least
# 5 (perftest's least) and at most 5000 messages, a few seconds at the
# two-VM speed under TCG (5 x 8 MiB: ten).  bench/report.py takes the bytes moved from perftest's counts
# (#iterations x #bytes for a count, its rate x -D for a duration).
bw_cmd() {
	local op=$1 s=$2 n
	if [ "$op" != send ] && [ "$s" -lt 4194304 ]; then
		echo "ib_${op}_bw -s $s -D $BENCH_DURATION --margin $BENCH_MARGIN"
		return
	fi
	n=$((12582912 / s))
	[ "$n" -gt 5000 ] && n=5000
	[ "$n" -lt 5 ] && n=5  # perftest's least -n
	echo "ib_${op}_bw -s $s -n $n"
}

# tcp_tests: "NAME LEN" lines: the runs without RDMA, or nothing in quick
# mode; NAME starts with the kind: tcp (iperf3 -l LEN) or udp (udp_baseline
# with LEN-byte datagrams, a flood for udp_bw_*, a ping-pong of
# BENCH_LAT_ITERS round trips for udp_lat_*; two VMs only).
_tcp_tests() {
	local s
	[ "$BENCH_SUITE" = quick ] && return
	[ "${BENCH_TCP:-1}" = 1 ] || return
	for s in 65536 1048576; do
		[ "${BENCH_SETUP:-}" = pair ] || [ "$s" = 65536 ] || continue
		echo "tcp_bw_$(size_label "$s") $s"
	done
	[ "${BENCH_SETUP:-}" = pair ] || return 0
	echo "udp_bw_$(roce_frame 1500)B $(roce_frame 1500)"
	# the link's latency: 40 B, the UDP payload of an 8-byte RDMA WRITE
	# (BTH 12 + RETH 16 + 8 + ICRC 4), as ib_write_lat -s 8 sends
	echo "udp_lat_40B 40"
	echo "tcp_bw_64K_mtu9000 65536"
	echo "udp_bw_$(roce_frame 9000)B_mtu9000 $(roce_frame 9000)"
}

size_label() {
	case $1 in
	*[!0-9]*) echo "$1" ;;
	*) if [ $(($1 % 1048576)) = 0 ]; then echo "$(($1 / 1048576))M"; elif [ $(($1 % 1024)) = 0 ]; then echo "$(($1 / 1024))K"; else echo "${1}B"; fi ;;
	esac
}

# bench_drivers ROUND: the drivers of round ROUND in run order: rroce and
# rxe, and "base" (rroce.ko and provider of an older commit, bench/base.sh)
# when BENCH_BASE_KO is set; the list turns by one each round, so each
# driver goes first equally often and drift over the run favours none.
bench_drivers() {
	local d=(rroce) i n
	[ -n "${BENCH_BASE_KO:-}" ] && d+=(base)
	d+=(rxe)
	n=${#d[@]}
	for ((i = 0; i < n; i++)); do printf '%s ' "${d[$(((i + $1 - 1) % n))]}"; done
	echo
}

# The rroce.ko loaded now (vm-init loads RROCE_KO).
_bench_ko=
[ -d /sys/module/rroce ] && _bench_ko=${RROCE_KO:-}

# bench_module DRIVER: rroce.ko and provider of DRIVER loaded (rroce: the
# working tree's, RROCE_KO and RROCE_PROVIDER; base: BENCH_BASE_KO and
# BENCH_BASE_PROVIDER): a different module loaded is removed with its
# devices first, and libibverbs' rroce.driver names the provider.
bench_module() {
	local ko=$RROCE_KO prov=$RROCE_PROVIDER
	[ "$1" = base ] && ko=${BENCH_BASE_KO:?} prov=${BENCH_BASE_PROVIDER:?}
	if [ -d /sys/module/rroce ] && [ "$_bench_ko" != "$ko" ]; then
		links_del_all
		rmmod rroce || return 1
	fi
	# (RROCE_KO_ARGS: module parameters, as drv_load passes them; a module
	# that lacks one ignores it with a warning)
	# shellcheck disable=SC2086
	[ -d /sys/module/rroce ] || { insmod "$ko" ${RROCE_KO_ARGS:-} && _bench_ko=$ko; } || return 1
	echo "driver ${prov%-rdmav34.so}" >/etc/libibverbs.d/rroce.driver
}

# bench_use DRIVER NETDEV ADDR: make DRIVER's device (rroce0 or rxe0) the
# only RDMA device on NETDEV in init_net; sets DEV and GIDX (the RoCE v2 GID
# index of IPv4 ADDR on it).  rroce and rdma_rxe both want UDP 4791 in
# init_net, so the other one is deleted (and rdma_rxe unloaded).  "base" is
# rroce0 of BENCH_BASE_KO with the provider BENCH_BASE_PROVIDER: the module
# is swapped (rmmod, insmod) and libibverbs' rroce.driver rewritten (vm-init
# made /etc/libibverbs.d a private copy; each perftest process reads it).
bench_use() {
	local drv=$1 nd=$2 addr=$3 ko prov
	stamp "device: $drv on $nd"
	case $drv in
	rroce|base)
		rdma link delete rxe0 2>/dev/null
		modprobe -r rdma_rxe 2>/dev/null
		bench_module "$drv" || return 1
		ibdev_exists rroce0 || rdma link add rroce0 type rroce netdev "$nd" || return 1
		DEV=rroce0
		;;
	rxe)
		rdma link delete rroce0 2>/dev/null
		wait_for 10 bash -c '! ss -Hlun "sport = :4791" | grep -q .'
		modprobe rdma_rxe || return 1
		ibdev_exists rxe0 || rdma link add rxe0 type rxe netdev "$nd" || return 1
		DEV=rxe0
		;;
	*) echo "bench_use: unknown driver $drv" >&2; return 1 ;;
	esac
	wait_for 10 port_active "$DEV"
	wait_for 10 gid_idx "$DEV" "$addr" || { echo "no RoCE v2 GID of $addr on $DEV" >&2; return 1; }
	GIDX=$(gid_idx "$DEV" "$addr")
}

# cpu_jiffies: "kern user idle" jiffies of this guest so far, all CPUs,
# USER_HZ units: kern = system+irq+softirq (the cost of the RDMA stack),
# user = user+nice (perftest busy-polls its CQ: that is ~100% of a CPU
# whatever the driver, so it is recorded but not what the report calls CPU
# cost), idle = idle+iowait.  The three add up to the wall time only if
# the kernel accounts its interrupt time (CONFIG_IRQ_TIME_ACCOUNTING):
# with tick sampling, a softirq that runs on an idle CPU whose tick is
# stopped (NO_HZ) is neither idle nor counted anywhere, and that is where
# a receiver does most of its work.  The report checks the sum.
cpu_jiffies() { awk '$1 == "cpu" { print $4 + $7 + $8, $2 + $3, $5 + $6; exit }' /proc/stat; }
now_ns() { date +%s%N; }
# link_bytes: "tx rx" byte counts of the NIC BENCH_NIC so far ("0 0" if unset)
link_bytes() {
	local d=/sys/class/net/${BENCH_NIC:-}/statistics tx=0 rx=0
	if [ -n "${BENCH_NIC:-}" ]; then
		read -r tx <"$d/tx_bytes" && read -r rx <"$d/rx_bytes" || { tx=0 rx=0; }
	fi
	echo "$tx $rx"
}
_cpu_k0=0 _cpu_u0=0 _cpu_i0=0 _cpu_t0=0 _cpu_tx0=0 _cpu_rx0=0
cpu_mark() {
	read -r _cpu_tx0 _cpu_rx0 < <(link_bytes)
	read -r _cpu_k0 _cpu_u0 _cpu_i0 < <(cpu_jiffies)
	_cpu_t0=$(now_ns)
}
# cpu_write FILE SIDE: kernel, user and idle CPU seconds and wall seconds
# since cpu_mark, and with BENCH_NIC the bytes it sent and received since
cpu_write() {
	local k1 u1 i1 t1 hz tx1 rx1 link=
	read -r k1 u1 i1 < <(cpu_jiffies)
	t1=$(now_ns)
	read -r tx1 rx1 < <(link_bytes)
	[ -n "${BENCH_NIC:-}" ] && link=" $((tx1 - _cpu_tx0)) $((rx1 - _cpu_rx0))"
	hz=$(getconf CLK_TCK)
	awk -v k="$((k1 - _cpu_k0))" -v u="$((u1 - _cpu_u0))" -v i="$((i1 - _cpu_i0))" -v hz="$hz" \
		-v t="$((t1 - _cpu_t0))" -v n="$(nproc)" -v s="$2" -v l="$link" \
		'BEGIN { printf "%.3f %.3f %.3f %d %s %.3f%s\n", k / hz, u / hz, t / 1e9, n, s, i / hz, l }' >"$1"
}
# tsc_check OUT: a kernel that marks its TSC unstable stops accounting
# interrupt time (arch/x86/kernel/tsc.c); the file OUT/tsc-unstable tells
# the report so
tsc_check() {
	dmesg | grep -q 'Marking TSC unstable' && echo "${RROCE_PAIR_ROLE:-vm}" >>"$1/tsc-unstable"
	return 0
}

# gid_idx DEV ADDR: the RoCE v2 GID index of IPv4 ADDR on DEV (one grep
# over the 1024 sysfs entries: a shell loop over them takes seconds in TCG)
gid_idx() {
	local g f i t
	g=$(gid_v4 "$2")
	for f in $(grep -lx "$g" "$SYS_IB/$1/ports/1/gids/"* 2>/dev/null); do
		i=${f##*/}
		read -r t <"$SYS_IB/$1/ports/1/gid_attrs/types/$i" 2>/dev/null
		[ "$t" = "RoCE v2" ] && { echo "$i"; return 0; }
	done
	return 1
}

# is_result FILE: FILE has a perftest result line (or an iperf3 JSON end,
# or udp_baseline's report)
is_result() { grep -qE '^ *[0-9]+ +[0-9]+ +[0-9.]+|^udp_baseline: (len|pingpong) ' "$1" || grep -q '"sum_received"' "$1"; }
