#!/usr/bin/env bash
# RC data integrity with ibv_rc_pingpong -c (the server validates the buffer
# it received) for 1 B, 4 KiB and 1 MiB messages (1 MiB = 1024 packets at
# the default path MTU 1024):
#   - $DEV0 (init_net, client) <-> $DEV1 (netns peer, server) over the veth
#   - rroce2 on eth0 (init_net) <-> rroce3 on eth1 (netns peer2) over the
#     virtio-net NICs of scripts/vm (made here, deleted at the end)
#   - client and server on the same device $DEV0 (10.77.0.1)
#   - 64 KiB over the IPv6 GIDs (fd77::1 <-> fd77::2), and with completion
#     events (-e: ibv_req_notify_cq + completion channel)
# rxe (6.12) has no network namespace support: only the same-device cases
# run there.  While rroce has no data path yet only the virtio device setup
# and teardown run.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
. "$(dirname "$0")/../lib.sh"
test_init 14
trap 'rm -f "$PAIR_SRV" "$PAIR_CLI"' EXIT

E0=${RROCE_TYPE}2 E1=${RROCE_TYPE}3 EIP0=10.78.0.1 EIP1=10.78.0.2
# SIZE ITERS TIMEOUT(s, per side)
CASES=("1 100 60" "4096 100 60" "1048576 10 120")
NOTNS="$RROCE_TYPE has no network namespace support (its UDP socket and routes live in init_net only)"

# Why no traffic can run at all (the virtio device setup runs regardless).
why=$(provider_unavailable)
command -v ibv_rc_pingpong >/dev/null || why=${why:-ibv_rc_pingpong not installed}
[ -n "$why" ] || why=$(datapath_unavailable "$DEV0" "$IP0")

# tcp_refused IP: a TCP connect to IP port 9 gets a reset back, so IP is
# reachable both ways (the guest has no ping).
# shellcheck disable=SC2317  # called through expect_ok
tcp_refused() { timeout 5 bash -c "exec 3<>/dev/tcp/$1/9" 2>&1 | grep -q 'Connection refused'; }

# cases LABEL SERVER_NS SERVER_DEV SERVER_IP CLIENT_NS CLIENT_DEV CLIENT_IP [SKIP_REASON]
# The three sizes on one path.  After a timeout (a failure already) the
# larger sizes on that path are skipped, to keep within the time limit.
cases() {
	local label=$1 c size iters tmo skip=${8:-}
	shift
	for c in "${CASES[@]}"; do
		read -r size iters tmo <<<"$c"
		t_begin "RC -c $size B x $iters: $label"
		if [ -n "$skip" ]; then
			t_skip "$skip"
			continue
		fi
		rc_pingpong_chk "$tmo" "$1" "$2" "$3" "$4" "$5" "$6" "$size" "$iters"
		if [ "$pair_crc" = 124 ] || [ "$pair_src" = 124 ]; then
			skip="the $size B case on this path timed out"
		fi
		t_end
	done
}

# 1-3: over the veth pair, across namespaces
skip=$why
[ "$RROCE_TYPE" = rxe ] && skip=$NOTNS
cases "$DEV0 (init_net) -> $DEV1 (netns $NS1) over veth" \
	"$NS1" "$DEV1" "$IP1" "" "$DEV0" "$IP0" "$skip"

# 4-8: over virtio-net
skip=
if [ "$RROCE_TYPE" = rxe ]; then
	skip=$NOTNS
elif ! ip link show eth0 >/dev/null 2>&1 || ! ns "$NS2" ip link show eth1 >/dev/null 2>&1; then
	skip="no virtio NICs (eth0 in init_net, eth1 in netns $NS2): scripts/vm --no-nics?"
fi
t_begin "$E0 on eth0 (init_net) and $E1 on eth1 (netns $NS2) come up"
if [ -n "$skip" ]; then
	t_skip "$skip"
else
	expect_ok "$EIP1 reachable (eth0 -> eth1 over the QEMU hub)" tcp_refused "$EIP1" &&
		expect_ok "link add $E0" link_add "$E0" eth0 &&
		expect_ok "link add $E1" link_add "$E1" eth1 "$NS2" &&
		expect_wait "$E0 ACTIVE" 10 port_active "$E0" &&
		expect_wait "$E1 ACTIVE" 10 port_active "$E1" &&
		expect_wait "$E0 GID of $EIP0" 10 gid_present "$E0" "$(gid_v4 "$EIP0")" &&
		expect_wait "$E1 GID of $EIP1" 10 gid_present "$E1" "$(gid_v4 "$EIP1")" ||
		skip="$E0/$E1 did not come up"
	t_end
fi
cases "$E0 (eth0, init_net) -> $E1 (eth1, netns $NS2) over virtio-net" \
	"$NS2" "$E1" "$EIP1" "" "$E0" "$EIP0" "${skip:-$why}"
t_begin "delete $E0 and $E1"
if [ -n "$skip" ] && ! ibdev_exists "$E0" && ! ibdev_exists "$E1"; then
	t_skip "$skip"
else
	for d in "$E0" "$E1"; do
		ibdev_exists "$d" && expect_ok "link delete $d" link_del "$d"
		expect_wait "$d gone" 10 not ibdev_exists "$d"
	done
	t_end
fi

# 9-11: both ends on one device
cases "$DEV0 -> $DEV0 (same device, $IP0)" "" "$DEV0" "$IP0" "" "$DEV0" "$IP0" "$why"

# pp6 LABEL ARGS...: $DEV0 -> $DEV1 on the RoCE v2 GIDs of the IPv6
# addresses (the TCP exchange of ibv_rc_pingpong still uses IPv4).
pp6() {
	local label=$1 sidx cidx
	shift
	t_begin "$label"
	if [ -n "$why" ] || [ "$RROCE_TYPE" = rxe ]; then
		t_skip "${why:-$NOTNS}"
		return
	fi
	sidx=$(gid_index "$DEV1" "$(gid_of "$IP6_1")")
	cidx=$(gid_index "$DEV0" "$(gid_of "$IP6_0")")
	if [ -z "$sidx" ] || [ -z "$cidx" ]; then
		t_fail "no RoCE v2 GID of $IP6_1 on $DEV1 ('$sidx') or $IP6_0 on $DEV0 ('$cidx')"
		t_end
		return
	fi
	RC_PORT=$((RC_PORT + 1))
	pair_run 120 "$NS1" "" "$RC_PORT" \
		ibv_rc_pingpong -c -d "$DEV1" -g "$sidx" -p "$RC_PORT" "$@" -- \
		ibv_rc_pingpong -c -d "$DEV0" -g "$cidx" -p "$RC_PORT" "$@" "$IP1"
	diag "client: $(grep -E '(bytes|iters) in' "$PAIR_CLI" | tr '\n' ' ')"
	grep -q "remote address: .* GID $IP6_1\$" "$PAIR_CLI" || t_fail "client did not get the server's GID $IP6_1"
	grep -q "iters in" "$PAIR_CLI" || t_fail "client reported no result"
	if grep -q "invalid data" "$PAIR_SRV"; then
		t_fail "server found bad data: $(grep "invalid data" "$PAIR_SRV" | head -3 | tr '\n' ' ')"
	fi
	t_end
}

# 12-13: IPv6, and completion events
pp6 "RC -c 65536 B x 50 over IPv6 GIDs: $DEV0 ($IP6_0) -> $DEV1 ($IP6_1)" -s 65536 -n 50
pp6 "RC -c -e (completion events) 4096 B x 100: $DEV0 -> $DEV1 over IPv6" -s 4096 -n 100 -e

test_done
