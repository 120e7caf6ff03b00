#!/usr/bin/env bash
# UCX over rroce (Debian's ucx-utils, UCX 1.13), out of the box: the user
# sets only UCX_NET_DEVICES and UCX_TLS, no workaround variables.
#   - ucx_info -d lists rc_verbs and ud_verbs on $DEV0:1 and $RDEV:1;
#   - ucx_perftest between the namespaces ($RDEV in $NS1 serves, $DEV0
#     runs the client) over rc_verbs (with ud_verbs for its wire-up): tag
#     matching bandwidth and latency, UCP put and get (RDMA WRITE/READ
#     underneath), stream; over ud_verbs alone: tag matching bandwidth.
#     Each run must end with its "Final:" line on both sides, and rroce0's
#     counters must show the traffic (so it did not go over TCP or shared
#     memory) without errors;
#   - io_demo -q (UCX's data-integrity check) reads and writes 1 KiB..256 KiB
#     buffers over rc_verbs, every transfer checked.
# UCX decides IPv4 vs IPv6 of a received RoCE datagram from wc.sl as mlx5
# reports it (L3 header type); before rroce did so, ud_verbs dropped every
# datagram (UD endpoint timeout) unless UCX_UD_VERBS_ETH_DGID_CHECK=n.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
. "$(dirname "$0")/../lib.sh"
test_init 10
trap 'rm -f "$PAIR_SRV" "$PAIR_CLI"' EXIT

why=$(provider_unavailable)
for t in ucx_info ucx_perftest io_demo; do
	command -v "$t" >/dev/null || why=${why:-$t not installed (ucx-utils)}
done
[ -n "$why" ] || why=$(datapath_unavailable "$DEV0" "$IP0")
[ "$RROCE_TYPE" = rxe ] && why=${why:-rxe has no network namespace support}
[ -n "$why" ] || why=$(hwc_missing "$DEV0")
if [ -n "$why" ]; then
	for i in $(seq 9); do ktap_skip "UCX over $DEV0 (part $i)" "$why"; done
	test_done
fi
peer_gids
PORT=18990
# rroce0's counters at the start: an earlier script in the same VM may have
# left errors in them on purpose (rc_errors)
declare -A z0
hwc_snap "$DEV0" z0

t_begin "ucx_info -d: rc_verbs and ud_verbs on $DEV0:1 and $RDEV:1"
info=$(ucx_info -d 2>&1)
for dev in "$DEV0:1" "$RDEV:1"; do
	for tl in rc_verbs ud_verbs; do
		printf '%s\n' "$info" | grep -A1 -E "Transport: $tl\$" | grep -qE "Device: $dev\$" ||
			t_fail "no $tl on $dev in ucx_info -d"
	done
done
t_end

# perf NAME TLS TEST SIZE ITERS: ucx_perftest $RDEV (server, in $NS1) <-
# $DEV0 (client), checks both ends and rroce0's counters.
perf() {
	local name=$1 tls=$2 test=$3 size=$4 iters=$5 line
	local -A b a d
	t_begin "ucx_perftest -t $test -s $size -n $iters, UCX_TLS=$tls: $DEV0 -> $RDEV ($name)"
	hwc_snap "$DEV0" b
	pair_run 120 "$NS1" "" $PORT \
		env UCX_NET_DEVICES="$RDEV:1" UCX_TLS="$tls" ucx_perftest -p $PORT -- \
		env UCX_NET_DEVICES="$DEV0:1" UCX_TLS="$tls" ucx_perftest "$IP1" -p $PORT -t "$test" -s "$size" -n "$iters"
	hwc_snap "$DEV0" a
	hwc_delta b a d
	line=$(grep -E '^Final:' "$PAIR_CLI" | tail -1)
	if [ -z "$line" ]; then
		t_fail "no 'Final:' line from the client: $(grep -m3 -iE 'error|fatal' "$PAIR_CLI" | tr '\n' ' ')"
	else
		diag "$name: $(tr -s ' ' <<<"$line")"
	fi
	grep -qiE 'error|fatal' "$PAIR_CLI" "$PAIR_SRV" &&
		t_fail "UCX printed errors: $(grep -h -m3 -iE 'error|fatal' "$PAIR_CLI" "$PAIR_SRV" | tr '\n' ' ')"
	# every message crossed rroce0 (at least one packet each way per message)
	[ "${d[tx_packets]}" -ge "$iters" ] && [ "${d[rx_packets]}" -ge 1 ] ||
		t_fail "$DEV0 counters do not show the traffic:$(hwc_show d)"
	[ "${d[completion_errors]}" = 0 ] && [ "${d[retry_exceeded]}" = 0 ] ||
		t_fail "$DEV0 counters show errors:$(hwc_show d)"
	t_end
	PORT=$((PORT + 1))
}

perf "RC tag bandwidth" rc_verbs,ud_verbs tag_bw 65536 2000
perf "RC tag latency" rc_verbs,ud_verbs tag_lat 8 2000
perf "RC UCP put (RDMA WRITE)" rc_verbs,ud_verbs ucp_put_bw 65536 1000
perf "RC UCP get (RDMA READ)" rc_verbs,ud_verbs ucp_get 65536 1000
perf "RC stream" rc_verbs,ud_verbs stream_bw 65536 1000
perf "UD tag bandwidth" ud_verbs tag_bw 4096 2000

t_begin "io_demo -q (data checked) read+write 1K..256K x 300 over rc_verbs: $DEV0 -> $RDEV"
# The io_demo server serves until killed; it must know the largest size.
srv=/tmp/ucx-io-srv.$$
ns_bg "$NS1" env UCX_NET_DEVICES="$RDEV:1" UCX_TLS=rc_verbs,ud_verbs \
	timeout $((240 * ${RROCE_TIMEOUT_SCALE:-1})) io_demo -q -d 1024:262144 -p $PORT >"$srv" 2>&1
spid=$!
if ! wait_for 30 tcp_listening_in "$spid" $PORT; then
	t_fail "io_demo server not listening on TCP $PORT: $(tail -3 "$srv" | tr '\n' ' ')"
else
	declare -A ib ic id
	hwc_snap "$DEV0" ib
	env UCX_NET_DEVICES="$DEV0:1" UCX_TLS=rc_verbs,ud_verbs timeout $((180 * ${RROCE_TIMEOUT_SCALE:-1})) \
		io_demo -q -p $PORT -o read,write -d 1024:262144 -i 300 "$IP1" >"$PAIR_CLI" 2>&1
	rc=$?
	hwc_snap "$DEV0" ic
	hwc_delta ib ic id
	diag "io_demo client run: $DEV0 counters$(hwc_show id)"
	[ $rc = 0 ] || t_fail "io_demo client exited $rc: $(tail -3 "$PAIR_CLI" | tr '\n' ' ')"
	grep -q "Client exit with status 'OK'" "$PAIR_CLI" || t_fail "io_demo client did not end with status OK"
	# -q: every buffer read or written is checked; a bad one is reported.
	# (The server's "Connection reset by remote peer" is the client's
	# closing, and its last receive is canceled by design.)
	bad=$(grep -h -iE 'mismatch|corrupt|invalid|assert|fatal|error' "$PAIR_CLI" "$srv" |
		grep -vE 'Connection reset by remote peer|Request canceled')
	[ -z "$bad" ] || t_fail "io_demo reports: $(head -3 <<<"$bad" | tr '\n' ' ')"
	diag "io_demo: $(grep -E 'total min:' "$PAIR_CLI" | tail -1 | sed 's/^\[[0-9.]*\] //' | tr -s ' ')"
fi
kill "$spid" 2>/dev/null
wait "$spid" 2>/dev/null
hwc_snap "$DEV0" ib
hwc_delta ic ib id
diag "io_demo server killed: $DEV0 counters since the client exited$(hwc_show id)"
rm -f "$srv"
t_end

t_begin "rroce counters after UCX: no ICRC errors, no retry exhaustion on $DEV0"
declare -A z1 z
hwc_snap "$DEV0" z1
hwc_delta z0 z1 z
[ "${z[rx_icrc_errors]}" = 0 ] && [ "${z[retry_exceeded]}" = 0 ] && [ "${z[rnr_retry_exceeded]}" = 0 ] ||
	t_fail "rx_icrc_errors ${z[rx_icrc_errors]} retry_exceeded ${z[retry_exceeded]} rnr_retry_exceeded ${z[rnr_retry_exceeded]}"
t_end

test_done
