#!/usr/bin/env bash
# `make run`: runs inside the VM (scripts/vm) once the standard topology is
# up (scripts/vm-init.sh: rroce0 on rr0 in init_net, rroce1 on rr1 in netns
# "peer", a veth pair between them) and shows rroce at work with stock
# tools, one step at a time, each ending in a line
#   PASS|FAIL  what: a figure  (seconds)
# Every step is bounded by timeouts (selftests/lib.sh pair_run: each side
# is killed after its limit, the server's readiness is polled, never slept
# for), so the demo cannot hang; it exits 1 if a step failed.
#
# The invocations are those of the selftests (selftests/rdma/rc_pingpong.sh,
# perftest.sh, rdma_cm.sh), through the same selftests/lib.sh helpers.
# Figures come from a TCG-emulated VM: they show that it works, not how
# fast hardware would be (see Documentation/benchmarks.md).
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../selftests/lib.sh
. "$here/../selftests/lib.sh" || exit 1

# Server on $DEV1 in netns $NS1 (10.77.0.2), client on $DEV0 in init_net.
SNS=$NS1 SDEV=$DEV1 SIP=$IP1 CDEV=$DEV0 CIP=$IP0
TMO=60 # seconds per side of every client/server pair
NSTEPS=6
LOG=/tmp/rroce-demo.$$.log
trap 'rm -f "$LOG" "$PAIR_SRV" "$PAIR_CLI"' EXIT

if [ -t 1 ]; then B=$'\033[1m' G=$'\033[32m' R=$'\033[31m' N=$'\033[0m'; else B= G= R= N=; fi
step=0 npass=0 nfail=0 failed=() t_start=$(date +%s%N)

# step_begin TITLE: a step's heading; starts its clock and the lib.sh
# subtest state (t_fail in the helpers sets _t_err).
step_begin() {
	step=$((step + 1))
	step_title=$1
	printf '\n%s[%d/%d] %s%s\n' "$B" "$step" "$NSTEPS" "$1" "$N"
	step_t0=$(date +%s%N)
	t_begin "$1"
	: >"$LOG"
}
# cmd CMD...: show a command before running it (output indented).
cmd() {
	printf '  $ %s\n' "$*"
	timeout 20 "$@" 2>&1 | sed 's/^/    /'
}
# elapsed T0_NS: seconds since T0_NS with one decimal
elapsed() { local d=$((($(date +%s%N) - $1) / 100000000)); echo "$((d / 10)).$((d % 10))"; }
# step_end FIGURE: PASS unless a check of this step failed (t_fail); the
# reasons (lines "# FAIL: ..." of the helpers, kept in $LOG) follow a FAIL.
step_end() {
	if [ "$_t_err" = 0 ]; then
		npass=$((npass + 1))
		printf '  %sPASS%s  %s  (%s s)\n' "$G" "$N" "$1" "$(elapsed "$step_t0")"
	else
		nfail=$((nfail + 1))
		failed+=("$step_title")
		printf '  %sFAIL%s  %s  (%s s)\n' "$R" "$N" "$1" "$(elapsed "$step_t0")"
		grep -h '^# FAIL' "$LOG" | head -6 | sed 's/^# /      /'
	fi
	_t_desc=
}
# fail MSG: record a failed check of the current step
fail() { t_fail "$*" >>"$LOG"; }

# Checks whose time is not spent on traffic need both devices and a GID.
sidx=$(gid_index "$SDEV" "$(gid_v4 "$SIP")" 2>/dev/null)
cidx=$(gid_index "$CDEV" "$(gid_v4 "$CIP")" 2>/dev/null)
declare -A hwc_before hwc_after hwc_d
hwc_snap "$CDEV" hwc_before 2>/dev/null
: >"$PAIR_SRV"
: >"$PAIR_CLI"
dmesg_mark

echo "${B}rroce at work${N}: $CDEV on $IF0 ($CIP, init_net) <-> $SDEV on $IF1 ($SIP, netns $SNS), a veth pair"
echo "(a TCG-emulated VM: the figures show it works, not hardware speed)"

# ----------------------------------------------------------------- 1. devices
step_begin "the devices: rdma link, ibv_devices, ibv_devinfo"
cmd rdma link show
cmd ibv_devices
printf '  $ ibv_devinfo -d %s   (selected lines)\n' "$CDEV"
timeout 20 ibv_devinfo -d "$CDEV" >"$LOG.info" 2>&1 || fail "ibv_devinfo -d $CDEV failed: $(tail -2 "$LOG.info" | tr '\n' ' ')"
grep -E 'hca_id|transport|fw_ver|vendor_id|phys_port_cnt|state:|active_mtu|link_layer' "$LOG.info" | sed 's/^[[:space:]]*/    /'
printf '  RoCE v2 GID of %s on %s: index %s; of %s on %s: index %s\n' \
	"$CIP" "$CDEV" "${cidx:-none}" "$SIP" "$SDEV" "${sidx:-none}"
for d in "$CDEV" "$SDEV"; do
	port_active "$d" || fail "$d port is '$(port_state "$d")', not ACTIVE"
done
grep -q 'PORT_ACTIVE' "$LOG.info" || fail "ibv_devinfo (through the rroce provider) does not show $CDEV's port ACTIVE"
[ -n "$sidx" ] && [ -n "$cidx" ] || fail "no RoCE v2 GID of $CIP on $CDEV ('$cidx') or of $SIP on $SDEV ('$sidx')"
mtu=$(sed -n 's/.*active_mtu:[[:space:]]*\([0-9]*\).*/\1/p' "$LOG.info" | head -1)
rm -f "$LOG.info"
step_end "$CDEV and $SDEV ACTIVE, provider claims them, active MTU ${mtu:-?} ($IF0 MTU $(cat /sys/class/net/$IF0/mtu 2>/dev/null || echo ?))"

# ------------------------------------------------------------ 2. rc_pingpong
PP_SIZE=4096 PP_ITERS=500
step_begin "ibv_rc_pingpong -c: RC SEND/RECV $SDEV (server, netns $SNS) <- $CDEV (client), buffers validated"
printf '  $ ip netns exec %s ibv_rc_pingpong -c -d %s -g %s -s %s -n %s &\n' "$SNS" "$SDEV" "${sidx:-?}" "$PP_SIZE" "$PP_ITERS"
printf '  $ ibv_rc_pingpong -c -d %s -g %s -s %s -n %s %s\n' "$CDEV" "${cidx:-?}" "$PP_SIZE" "$PP_ITERS" "$SIP"
rc_pingpong_chk "$TMO" "$SNS" "$SDEV" "$SIP" "" "$CDEV" "$CIP" "$PP_SIZE" "$PP_ITERS" >>"$LOG" 2>&1
grep -E '(bytes|iters) in' "$PAIR_CLI" | sed 's/^/    /'
# "N bytes in S seconds = R Mbit/sec" / "N iters in S seconds = U usec/iter"
fig=$(awk -v n="$PP_ITERS" -v sz="$PP_SIZE" '/bytes in/ { b = $1; s = $4; r = $7 } /iters in/ { u = $7 }
	END { if (b) printf "%d x %d B each way, %.1f MB in %s s = %s Mbit/s, %s us per iteration", n, sz, b / 1e6, s, r, u }' "$PAIR_CLI")
[ "$_t_err" = 0 ] && fig="$fig; the server found every page intact"
step_end "${fig:-no result}"

# ------------------------------------------------------------ 3./4. perftest
# perf TOOL SIZE ITERS PORT: one perftest pair as selftests/rdma/perftest.sh
# runs it; sets $res to the client's result row.
perf() {
	local t=$1 size=$2 iters=$3 port=$4 common
	common=(-i 1 -n "$iters" -p "$port" -F -s "$size")
	printf '  $ ip netns exec %s %s -d %s -x %s %s &\n' "$SNS" "$t" "$SDEV" "${sidx:-?}" "${common[*]}"
	printf '  $ %s -d %s -x %s %s %s\n' "$t" "$CDEV" "${cidx:-?}" "${common[*]}" "$SIP"
	res=
	if [ -z "$sidx" ] || [ -z "$cidx" ]; then
		fail "no RoCE v2 GID of $SIP on $SDEV ('$sidx') or of $CIP on $CDEV ('$cidx')"
		return
	fi
	pair_run "$TMO" "$SNS" "" "$port" \
		"$t" -d "$SDEV" -x "$sidx" "${common[@]}" -- \
		"$t" -d "$CDEV" -x "$cidx" "${common[@]}" "$SIP" >>"$LOG" 2>&1
	# the result row: " #bytes #iterations" then the figures
	res=$(grep -E "^ *$size +[0-9]+ +[0-9.]+ +[0-9.]+" "$PAIR_CLI" | tail -1)
	if [ -z "$res" ]; then
		fail "$t client printed no result line: $(tail -3 "$PAIR_CLI" | tr '\n' ' ')"
	else
		grep -E '^ *#bytes' "$PAIR_CLI" | tail -1 | sed 's/^/    /'
		printf '    %s\n' "$res"
	fi
}

BW_SIZE=65536 BW_ITERS=500
step_begin "ib_write_bw: RDMA WRITE bandwidth, $((BW_SIZE / 1024)) KiB x $BW_ITERS, $CDEV -> $SDEV"
perf ib_write_bw "$BW_SIZE" "$BW_ITERS" 18951
fig="no result"
if [ -n "$res" ]; then
	# shellcheck disable=SC2086  # split the row into fields
	set -- $res
	fig="average $4 MB/s (peak $3 MB/s), $(awk -v s="$1" -v n="$2" 'BEGIN { printf "%.1f", s * n / 1048576 }') MiB written"
	[ "$2" = "$BW_ITERS" ] || fail "client ran $2 iterations, not $BW_ITERS"
fi
step_end "$fig"

LAT_SIZE=8 LAT_ITERS=500
step_begin "ib_write_lat: RDMA WRITE ping-pong latency, $LAT_SIZE B x $LAT_ITERS, $CDEV <-> $SDEV"
perf ib_write_lat "$LAT_SIZE" "$LAT_ITERS" 18952
fig="no result"
if [ -n "$res" ]; then
	# shellcheck disable=SC2086
	set -- $res
	fig="typical $5 us, average $6 us, min $3 us, max $4 us (perftest reports half the round trip)"
	[ "$2" = "$LAT_ITERS" ] || fail "client ran $2 iterations, not $LAT_ITERS"
fi
step_end "$fig"

# ---------------------------------------------------------------- 5. rping
# As selftests/rdma/rdma_cm.sh: the server in netns $SNS, the client once
# an rdma_cm id listens there (polled), both under timeout.
RP_COUNT=20 RP_SIZE=4000
cm_listening() { ns "$1" rdma res show cm_id 2>/dev/null | grep -q LISTEN; }
# the server listens, or has already exited (no point in waiting)
cm_server_up() { ! kill -0 "$spid" 2>/dev/null || cm_listening "$1"; }
step_begin "rping -V: rdma_cm connection by IP address (CM over the GSI QP), $RP_COUNT pings of $RP_SIZE B, data verified"
printf '  $ ip netns exec %s rping -s -V -C %s -S %s -a %s &\n' "$SNS" "$RP_COUNT" "$RP_SIZE" "$SIP"
printf '  $ rping -c -V -C %s -S %s -a %s\n' "$RP_COUNT" "$RP_SIZE" "$SIP"
rtmo=$((TMO * ${RROCE_TIMEOUT_SCALE:-1}))
ns "$SNS" timeout "$rtmo" stdbuf -oL rping -s -V -C "$RP_COUNT" -S "$RP_SIZE" -a "$SIP" >"$PAIR_SRV" 2>&1 &
spid=$!
fig="no connection"
wait_for 30 cm_server_up "$SNS"
if ! cm_listening "$SNS"; then
	fail "rping server did not listen: $(tail -3 "$PAIR_SRV" | tr '\n' ' ')"
	kill "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
else
	t0=$(date +%s%N)
	timeout "$rtmo" stdbuf -oL rping -c -V -C "$RP_COUNT" -S "$RP_SIZE" -a "$SIP" >"$PAIR_CLI" 2>&1
	crc=$?
	dt=$((($(date +%s%N) - t0) / 1000000))
	wait_for 20 not kill -0 "$spid" || kill "$spid" 2>/dev/null
	wait "$spid"
	src=$?
	[ "$crc" = 124 ] && fail "rping client timed out after ${rtmo}s"
	[ "$crc" = 0 ] || fail "rping client exited $crc: $(tail -3 "$PAIR_CLI" | tr '\n' ' ')"
	[ "$src" = 0 ] || fail "rping server exited $src: $(tail -3 "$PAIR_SRV" | tr '\n' ' ')"
	if grep -qi "error\|fail\|mismatch" "$PAIR_CLI" "$PAIR_SRV"; then
		fail "rping reported: $(grep -hi "error\|fail\|mismatch" "$PAIR_CLI" "$PAIR_SRV" | head -2 | tr '\n' ' ')"
	fi
	fig="connect, $RP_COUNT pings (each an RDMA READ, an RDMA WRITE and 4 SENDs, data verified) and disconnect in $((dt / 1000)).$(((dt % 1000) / 100)) s"
fi
step_end "$fig"

# -------------------------------------------------------------- 6. health
step_begin "afterwards: $CDEV's counters and the kernel log"
hwc_snap "$CDEV" hwc_after 2>/dev/null
hwc_delta hwc_before hwc_after hwc_d
printf '  %s hw_counters during the demo:%s\n' "$CDEV" "$(hwc_show hwc_d)"
[ "${hwc_d[completion_errors]:-0}" != 0 ] &&
	echo "  (completion_errors include receives flushed when a connection is torn down)"
[ -z "$(hwc_missing "$CDEV")" ] || fail "counters: $(hwc_missing "$CDEV")"
[ "${hwc_d[rx_icrc_errors]:-0}" = 0 ] || fail "rx_icrc_errors +${hwc_d[rx_icrc_errors]}"
[ "${hwc_d[tx_packets]:-0}" -gt 0 ] || fail "no packet sent"
bad=$(dmesg_since_mark | grep -E "$DMESG_BAD" | head -3)
[ -z "$bad" ] || fail "kernel log: $(printf '%s' "$bad" | tr '\n' ' ')"
fig="${hwc_d[tx_packets]:-0} packets sent, ${hwc_d[rx_packets]:-0} received, ${hwc_d[retransmits]:-0} retransmitted, ${hwc_d[rx_icrc_errors]:-0} ICRC errors"
[ -z "$bad" ] && fig="$fig; no kernel warning in dmesg"
step_end "$fig"

# ---------------------------------------------------------------- summary
echo
if [ "$nfail" = 0 ]; then
	printf '%sdemo: %d of %d steps passed in %s s%s\n' "$B" "$npass" "$NSTEPS" "$(elapsed "$t_start")" "$N"
else
	printf '%sdemo: %d passed, %d FAILED in %s s%s\n' "$B" "$npass" "$nfail" "$(elapsed "$t_start")" "$N"
	printf '  failed: %s\n' "${failed[@]}"
fi
cat <<EOF

Where to go next:
  make check          everything: host tests, VM selftests (plain kernel),
                      robustness tests (debug kernel); ends "N passed, N failed"
  make bench QUICK=1  perftest rroce vs rdma_rxe (5 min; make bench: about an hour)
  scripts/vm          a shell in this VM setup (rroce0 <-> rroce1 ready)
  README.md           using the device, what works, the numbers
  Documentation/      conformance.md, robustness.md, benchmarks.md, design.md, testing.md
EOF
[ "$nfail" = 0 ]
