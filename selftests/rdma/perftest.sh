#!/usr/bin/env bash
# perftest over RC: ib_{send,write,read}_{bw,lat} with 4 KiB messages and
# 200 iterations, over UC: ib_write_bw, ib_send_lat and ib_write_lat, and
# the atomics ib_atomic_{bw,lat} with FETCH_AND_ADD and CMP_AND_SWAP, between $DEV0 (init_net, client) and $DEV1 (netns peer,
# server), each on the RoCE v2 GID of its address.  A tool passes when both
# sides exit 0 and the client prints its result line for all iterations;
# the figures go to the log as diagnostics (TCG-emulated, so they only show
# relative cost; missing when perftest's clock calibration failed on a busy
# host, see perftest_figures_ok in lib.sh).
# Last, ib_write_bw -l 16 (16 work requests per post, 2,000 x 4 KiB): the
# responder answers the requests of one receive batch with one ACK, so it
# must send fewer than half as many ACKs as it receives WRITEs (one per
# WRITE before 2026-12-05).
# rxe (6.12) has no network namespace support: there both ends use $DEV0.
# Everything is skipped while rroce has no data path yet.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
. "$(dirname "$0")/../lib.sh"
PLAN=15
test_init $PLAN
trap 'rm -f "$PAIR_SRV" "$PAIR_CLI"' EXIT

# "TOOL[ ARGS...]": RC by default; UC (no READ/atomics there) with -c UC;
# atomics move 8 bytes (FETCH_AND_ADD unless -A CMP_AND_SWAP).
CASES=(ib_send_bw ib_write_bw ib_read_bw ib_send_lat ib_write_lat ib_read_lat
	"ib_write_bw -c UC" "ib_send_lat -c UC" "ib_write_lat -c UC"
	ib_atomic_bw "ib_atomic_bw -A CMP_AND_SWAP" ib_atomic_lat "ib_atomic_lat -A CMP_AND_SWAP")
TOOLS=(ib_send_bw ib_write_bw ib_read_bw ib_send_lat ib_write_lat ib_read_lat ib_atomic_bw ib_atomic_lat)
SIZE=4096 ITERS=200 TMO=120 PORT=18900

why=$(provider_unavailable)
for t in "${TOOLS[@]}"; do
	command -v "$t" >/dev/null || why=${why:-$t not installed (perftest)}
done
[ -n "$why" ] || why=$(datapath_unavailable "$DEV0" "$IP0")
if [ -n "$why" ]; then
	for t in "${CASES[@]}"; do ktap_skip "$t" "$why"; done
	test_done
fi

if [ "$RROCE_TYPE" = rroce ]; then
	SNS=$NS1 SDEV=$DEV1 SIP=$IP1
else
	SNS='' SDEV=$DEV0 SIP=$IP0
	diag "$RROCE_TYPE has no network namespace support: server and client both on $DEV0"
fi
CDEV=$DEV0 CIP=$IP0
sidx=$(gid_index "$SDEV" "$(gid_v4 "$SIP")")
cidx=$(gid_index "$CDEV" "$(gid_v4 "$CIP")")

for c in "${CASES[@]}"; do
	read -r t extra <<<"$c"
	# shellcheck disable=SC2206  # the extra arguments are words
	extra=($extra)
	size=$SIZE
	case $t in ib_atomic_*) size=8 ;; esac
	t_begin "$c -s $size -n $ITERS: $CDEV (init_net) -> $SDEV (${SNS:-init_net})"
	PORT=$((PORT + 1))
	if [ -z "$sidx" ] || [ -z "$cidx" ]; then
		t_fail "no RoCE v2 GID of $SIP on $SDEV ('$sidx') or of $CIP on $CDEV ('$cidx')"
		t_end
		continue
	fi
	common=(-i 1 -n "$ITERS" -p "$PORT" -F "${extra[@]}")
	case $t in ib_atomic_*) ;; *) common+=(-s "$SIZE") ;; esac
	pair_run "$TMO" "$SNS" "" "$PORT" \
		"$t" -d "$SDEV" -x "$sidx" "${common[@]}" -- \
		"$t" -d "$CDEV" -x "$cidx" "${common[@]}" "$SIP"
	# the result row: " #bytes #iterations" then the figures
	res=$(perftest_row "$PAIR_CLI" "$size")
	if [ -z "$res" ]; then
		t_fail "client printed no result line: $(tail -5 "$PAIR_CLI" | tr '\n' ' ')"
	else
		# shellcheck disable=SC2086  # split the row into fields
		set -- $res
		[ "$2" = "$ITERS" ] || t_fail "client ran $2 iterations, not $ITERS"
		if perftest_figures_ok "$PAIR_CLI" "$res"; then
			case $t in
			*_bw) diag "$c: BW average $4 MB/s (peak $3 MB/s), $5 Mpps" ;;
			*_lat) diag "$c: latency typical $5 us, avg $6 us, min $3 us, max $4 us" ;;
			esac
		fi
	fi
	t_end
done

declare -A HB HA HD
t_begin "ib_write_bw -l 16 -s $SIZE -n 2000: $SDEV coalesces the ACKs of a receive batch"
HWC_WHY=$(hwc_missing "$SDEV")
if [ "$RROCE_TYPE" != rroce ]; then
	t_skip "$RROCE_TYPE: not ours to check"
elif [ -n "$HWC_WHY" ]; then
	t_fail "$HWC_WHY"
else
	PORT=$((PORT + 1))
	common=(-i 1 -n 2000 -l 16 -s "$SIZE" -p "$PORT" -F)
	hwc_snap "$SDEV" HB
	pair_run "$TMO" "$SNS" "" "$PORT" \
		ib_write_bw -d "$SDEV" -x "$sidx" "${common[@]}" -- \
		ib_write_bw -d "$CDEV" -x "$cidx" "${common[@]}" "$SIP"
	hwc_snap "$SDEV" HA
	hwc_delta HB HA HD
	res=$(perftest_row "$PAIR_CLI" "$SIZE")
	[ -n "$res" ] || t_fail "client printed no result line: $(tail -5 "$PAIR_CLI" | tr '\n' ' ')"
	acks=${HD[tx_packets]} reqs=${HD[rx_packets]} msgs=2000
	diag "$SDEV: $reqs packets received (2,000 WRITEs of $SIZE B), $acks sent"
	at_least "$SDEV rx_packets delta" "$reqs" $((msgs * SIZE / 4096))
	[ "$((acks * 2))" -lt "$msgs" ] 2>/dev/null ||
		t_fail "$SDEV sent $acks packets for $msgs WRITEs: ACKs not coalesced"
fi
t_end

test_done
