#!/usr/bin/env bash
# UD multicast (py/mcast.py): UD QPs on $DEV1 attach to 239.77.1.2
# (IPv4-mapped MGID); a UD QP on $DEV0 sends to QP 0xFFFFFF at the group:
# every attached QP receives every datagram intact (GRH checked), a
# detached or never attached one nothing; attach joins the IP group on the
# netdev (/proc/net/igmp) and the last detach leaves it; bad input (RC QP,
# unicast GID, detach when not attached, more than max_mcast_qp_attach)
# gets EINVAL/ENOMEM.  Then rdma_cm multicast with `mckey` (rdmacm-utils)
# between the two devices.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
. "$(dirname "$0")/../lib.sh"
test_init 3

why=$(provider_unavailable)
[ -n "$why" ] || why=$(datapath_unavailable "$DEV0" "$IP0")
peer_gids
igmp=(ip netns exec "$NS1" cat /proc/net/igmp)
[ "$RROCE_TYPE" = rxe ] && igmp=(cat /proc/net/igmp)
PY_CHECKS_TMO=$((200 * ${RROCE_TIMEOUT_SCALE:-1}))
if [ -n "$why" ]; then
	ktap_skip "UD multicast attach/detach" "$why"
	ktap_skip "mckey" "$why"
	test_done
fi
py_checks "UD multicast: attach/detach, delivery to every member, IGMP join/leave, bad input" \
	mcast.py "$DEV0" "$G0" "$RDEV" "$G1" "${igmp[@]}"

# rdma_cm multicast: mckey receiver in the peer namespace joins 239.77.1.3,
# the sender (-s) on $DEV0 sends 20 messages of 512 bytes to it.
t_begin "mckey: rdma_cm multicast join + 20 datagrams $DEV0 -> $RDEV"
tmo=$((60 * ${RROCE_TIMEOUT_SCALE:-1}))
rlog=/tmp/mckey-recv.$$
slog=/tmp/mckey-send.$$
if [ "$RROCE_TYPE" = rxe ]; then
	timeout "$tmo" mckey -m 239.77.1.3 -b "$IP0" -C 20 -S 512 >"$rlog" 2>&1 &
else
	ns "$NS1" timeout "$tmo" mckey -m 239.77.1.3 -b "$IP1" -C 20 -S 512 >"$rlog" 2>&1 &
fi
rpid=$!
sleep $((3 * ${RROCE_TIMEOUT_SCALE:-1}))
timeout "$tmo" mckey -m 239.77.1.3 -b "$IP0" -C 20 -S 512 -s >"$slog" 2>&1
src=$?
wait "$rpid"
rrc=$?
while IFS= read -r l; do diag "recv: $l"; done <"$rlog"
while IFS= read -r l; do diag "send: $l"; done <"$slog"
[ $src = 0 ] || t_fail "mckey sender exited $src"
[ $rrc = 0 ] || t_fail "mckey receiver exited $rrc"
grep -q "test complete" "$rlog" || t_fail "receiver did not complete"
t_end

test_done
