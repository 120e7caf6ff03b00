#!/usr/bin/env bash
# libfabric 1.17 (Debian's libfabric-bin) over rroce: fi_pingpong -c (every
# message checked) over the verbs provider's MSG endpoints and over
# verbs;ofi_rxm (RDM) between the namespaces ($DEV0 client, $RDEV server
# in $NS1), and over the verbs provider's DGRAM endpoints (UD QPs, domain
# DEV-dgram) in 1 KiB messages: a datagram is at most the path MTU (1024 on
# the 1500-byte veth), and with -S 4096 fi_getinfo finds no endpoint (-61,
# which an earlier version of this test took for missing DGRAM support).
# $DEV0's rx_packets must cover the 200 messages.  ofi_rxm sizes its verbs
# CQ for 256 peers without clamping it to max_cqe: it needs a max_cqe
# above ~200 000 (rxe's 32 Ki fails it, as rroce's 64 Ki did).
# shellcheck source-path=SCRIPTDIR source=../lib.sh
. "$(dirname "$0")/../lib.sh"
test_init 4
trap 'rm -f "$PAIR_SRV" "$PAIR_CLI"' EXIT

why=$(provider_unavailable)
command -v fi_pingpong >/dev/null || why=${why:-fi_pingpong not installed (libfabric-bin)}
[ -n "$why" ] || why=$(datapath_unavailable "$DEV0" "$IP0")
[ "$RROCE_TYPE" = rxe ] && why=${why:-rxe has no network namespace support}
if [ -n "$why" ]; then
	for i in 1 2 3; do ktap_skip "libfabric over $DEV0 (part $i)" "$why"; done
	test_done
fi
peer_gids
PORT=19050

# fip PROV EP SNS SDEV CDEV DST [KIB]: fi_pingpong -c, 200 x KIB (4) KiB
fip() {
	local prov=$1 ep=$2 sns=$3 sdev=$4 cdev=$5 dst=$6 k=${7:-4} line
	t_begin "fi_pingpong -p '$prov' -e $ep -c, 200 x $k KiB: $cdev -> $sdev${sns:+ in $sns} (data checked)"
	rx0=$(cat "$(hwc_dir "$DEV0")/rx_packets")
	pair_run 120 "$sns" "" $PORT \
		fi_pingpong -p "$prov" -e "$ep" -I 200 -S $((k << 10)) -c -d "$sdev" -B $PORT -- \
		fi_pingpong -p "$prov" -e "$ep" -I 200 -S $((k << 10)) -c -d "$cdev" -P $PORT "$dst"
	line=$(grep -E "^${k}k +200 +=200 " "$PAIR_CLI" | tail -1)
	if [ -z "$line" ]; then
		t_fail "no result line '${k}k 200 =200': $(tail -3 "$PAIR_CLI" | tr '\n' ' ')"
	else
		diag "$(tr -s ' ' <<<"$line"); $DEV0 rx_packets +$(($(cat "$(hwc_dir "$DEV0")/rx_packets") - rx0))"
		[ $(($(cat "$(hwc_dir "$DEV0")/rx_packets") - rx0)) -ge 200 ] || t_fail "$DEV0 received fewer than the 200 messages' packets"
	fi
	t_end
	PORT=$((PORT + 1))
}

fip verbs msg "$NS1" "$RDEV" "$DEV0" "$IP1"
fip "verbs;ofi_rxm" rdm "$NS1" "$RDEV" "$DEV0" "$IP1"
fip verbs dgram "$NS1" "$RDEV-dgram" "$DEV0-dgram" "$IP1" 1

test_done
