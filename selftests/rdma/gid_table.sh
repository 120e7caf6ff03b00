#!/usr/bin/env bash
# The GID table follows the netdev's addresses: IPv4-mapped and IPv6 GIDs of
# type "RoCE v2" appear on `ip addr add` and disappear on `ip addr del`, on
# both devices (init_net and netns peer), and never leak across devices.
. "$(dirname "$0")/../lib.sh"
test_init 9

show_table() { gid_table "$1" | sed "s/^/  $1 /" | while read -r l; do diag "$l"; done; }
eui64_of() {
	local IFS=: m
	# shellcheck disable=SC2206
	m=($(cat "/sys/class/net/$1/address"))
	printf '%02x%s:%sff:fe%s:%s%s\n' $((0x${m[0]} ^ 2)) "${m[1]}" "${m[2]}" "${m[3]}" "${m[4]}" "${m[5]}"
}
wait_gid() { expect_wait "$1: GID $2 ($3) present" 10 gid_present "$1" "$2" "$3"; }
wait_nogid() { expect_wait "$1: GID $2 ($3) absent" 10 not gid_present "$1" "$2" "$3"; }

g0=$(gid_v4 "$IP0")
g1=$(gid_v4 "$IP1")
g6_0=$(gid_v6 "$IP6_0")
ll0=fe80:0000:0000:0000:$(eui64_of "$IF0")

t_begin "standard addresses of $IF0 are GIDs of $DEV0"
wait_gid "$DEV0" "$g0" "RoCE v2"
wait_gid "$DEV0" "$g6_0" "RoCE v2"
wait_gid "$DEV0" "$ll0" "RoCE v2"
expect_eq "GID 0 (default GID: link-local of the MAC)" "$(cat "$SYS_IB/$DEV0/ports/1/gids/0" 2>/dev/null)" "$ll0"
[ $_t_err = 0 ] || show_table "$DEV0"
t_end

t_begin "GIDs do not leak across devices"
wait_gid "$DEV1" "$g1" "RoCE v2"
if gid_present "$DEV1" "$g0" "RoCE v2"; then t_fail "$DEV1 has $IF0's GID $g0"; fi
if gid_present "$DEV0" "$g1" "RoCE v2"; then t_fail "$DEV0 has $IF1's GID $g1"; fi
[ $_t_err = 0 ] || { show_table "$DEV0"; show_table "$DEV1"; }
t_end

a4=10.77.5.1 a6=fd77::99
ga4=$(gid_v4 $a4) ga6=$(gid_v6 $a6)

t_begin "ip addr add $a4/24 dev $IF0 -> GID $ga4 (RoCE v2)"
expect_ok "ip addr add" ip addr add $a4/24 dev "$IF0"
wait_gid "$DEV0" "$ga4" "RoCE v2"
[ $_t_err = 0 ] || show_table "$DEV0"
t_end

t_begin "ip addr del $a4/24 dev $IF0 -> GID gone"
expect_ok "ip addr del" ip addr del $a4/24 dev "$IF0"
wait_nogid "$DEV0" "$ga4" "RoCE v2"
expect_eq "any entry with $ga4" "$(gid_table "$DEV0" | grep -c " $ga4 ")" 0
t_end

t_begin "ip addr add $a6/64 dev $IF0 -> GID $ga6 (RoCE v2)"
expect_ok "ip addr add" ip addr add $a6/64 dev "$IF0" nodad
wait_gid "$DEV0" "$ga6" "RoCE v2"
[ $_t_err = 0 ] || show_table "$DEV0"
t_end

t_begin "ip addr del $a6/64 dev $IF0 -> GID gone"
expect_ok "ip addr del" ip addr del $a6/64 dev "$IF0"
wait_nogid "$DEV0" "$ga6" "RoCE v2"
t_end

b4=10.77.6.2
gb4=$(gid_v4 $b4)
t_begin "address added in netns $NS1 on $IF1 -> GID on $DEV1 only, removed again"
expect_ok "ip addr add" ns "$NS1" ip addr add $b4/24 dev "$IF1"
wait_gid "$DEV1" "$gb4" "RoCE v2"
if gid_present "$DEV0" "$gb4" "RoCE v2"; then t_fail "$DEV0 got $gb4"; fi
expect_ok "ip addr del" ns "$NS1" ip addr del $b4/24 dev "$IF1"
wait_nogid "$DEV1" "$gb4" "RoCE v2"
t_end

t_begin "GID table of $DEV0 back to the start"
gid_table "$DEV0" >/tmp/gids.$$
expect_eq "RoCE v2 entries with $IP0" "$(grep -c " $g0 RoCE v2" /tmp/gids.$$)" 1
expect_eq "no stale entries" "$(grep -cE " ($ga4|$ga6) " /tmp/gids.$$)" 0
rm -f /tmp/gids.$$
t_end

test_done
