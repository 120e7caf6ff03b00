#!/usr/bin/env bash
# UD multicast: `ib_send_bw -c UD -g` (perftest: the server's UD QP on
# $DEV1 attaches to MGID ::ffff:239.77.1.2 with ibv_attach_mcast, the
# client on $DEV0 sends to QP 0xFFFFFF at the group; both count every
# message); while attached, $DEV1's netdev is a member of the IP group
# (/proc/net/igmp: rroce joins it), after the server detached and exited it
# is not.  Then rdma_cm multicast with `mckey` (rdmacm-utils: join, attach
# through librdmacm, 20 datagrams of 512 B) $DEV0 -> $DEV1.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
. "$(dirname "$0")/../lib.sh"
test_init 4
trap 'rm -f "$PAIR_SRV" "$PAIR_CLI"' EXIT

why=$(provider_unavailable)
for t in ib_send_bw mckey; do
	command -v "$t" >/dev/null || why=${why:-$t not installed}
done
[ -n "$why" ] || why=$(datapath_unavailable "$DEV0" "$IP0")
[ "$RROCE_TYPE" = rxe ] && why=${why:-rxe has no network namespace support}
if [ -n "$why" ]; then
	ktap_skip "ib_send_bw -c UD -g" "$why"
	ktap_skip "IP group left" "$why"
	ktap_skip "mckey" "$why"
	test_done
fi
peer_gids
GROUP=239.77.1.2
# /proc/net/igmp prints the group as the host-order hex of its network-order bytes
ghex=$(printf '%02X%02X%02X%02X' 2 1 77 239)
MGID=0:0:0:0:0:0:0:0:0:0:255:255:239:77:1:2 # perftest: 16 bytes, strtol base 0
ITERS=3000
joined=/tmp/mcast-joined.$$

t_begin "ib_send_bw -c UD -g -M ::ffff:$GROUP, 512 B x $ITERS: $DEV0 -> QP attached on $RDEV"
rm -f "$joined"
# One shell inside the namespace reading /proc/net/igmp with builtins only
# (no process per look: the group may be joined for well under a second).
ns "$NS1" bash -c '
	end=$((SECONDS + 120))
	while [ $SECONDS -lt $end ]; do
		while read -r l; do
			case $l in *"$1"*) : >"$2"; exit 0 ;; esac
		done </proc/net/igmp
	done' _ "$ghex" "$joined" &
watch=$!
common=(-c UD -g -M "$MGID" -s 512 -n "$ITERS" -F -p 18970)
pair_run 120 "$NS1" "" 18970 \
	ib_send_bw -d "$RDEV" -x "$G1" "${common[@]}" -- \
	ib_send_bw -d "$DEV0" -x "$G0" "${common[@]}" "$IP1"
kill "$watch" 2>/dev/null
wait "$watch" 2>/dev/null
for side in "$PAIR_CLI" "$PAIR_SRV"; do
	res=$(perftest_row "$side" 512)
	# shellcheck disable=SC2086
	set -- $res
	if [ "${2:-}" != "$ITERS" ]; then
		t_fail "$(basename "$side"): no result line for $ITERS iterations: $(tail -3 "$side" | tr '\n' ' ')"
	elif perftest_figures_ok "$side" "$res"; then
		diag "$(basename "$side"): $res"
	fi
done
[ -f "$joined" ] || t_fail "$IF1 never became a member of $GROUP (/proc/net/igmp) while the QP was attached"
t_end

t_begin "after the detach (server exit) $IF1 is no member of $GROUP"
ns "$NS1" cat /proc/net/igmp | grep -q "$ghex" && t_fail "$GROUP still joined: $(ns "$NS1" cat /proc/net/igmp | tr '\n' ' ')"
t_end

t_begin "mckey: rdma_cm multicast join + 20 datagrams $DEV0 -> $RDEV"
tmo=$((60 * ${RROCE_TIMEOUT_SCALE:-1}))
rlog=/tmp/mckey-recv.$$
slog=/tmp/mckey-send.$$
ns_bg "$NS1" timeout "$tmo" stdbuf -oL mckey -m 239.77.1.3 -b "$IP1" -C 20 -S 512 >"$rlog" 2>&1
rpid=$!
# The receiver posts its receives, joins, and (librdmacm attaches its QP
# when it takes the join event) prints "joined": the sender may start.
wait_for 20 has_line "$rlog" "mckey: joined" || t_fail "the receiver did not join: $(tail -2 "$rlog" | tr '\n' ' ')"
timeout "$tmo" mckey -m 239.77.1.3 -b "$IP0" -C 20 -S 512 -s >"$slog" 2>&1
src=$?
wait "$rpid"
rrc=$?
while IFS= read -r l; do diag "recv: $l"; done <"$rlog"
while IFS= read -r l; do diag "send: $l"; done <"$slog"
[ $src = 0 ] || t_fail "mckey sender exited $src"
[ $rrc = 0 ] || t_fail "mckey receiver exited $rrc"
grep -q "test complete" "$rlog" || t_fail "receiver did not complete"
rm -f "$rlog" "$slog" "$joined"
t_end

test_done
