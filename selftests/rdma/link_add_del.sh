#!/usr/bin/env bash
# rdma link add/delete: the device appears in sysfs and `rdma link show`
# with the right netdev, goes away on delete, and 20 add/delete cycles leave
# nothing behind (devices, UDP sockets).
. "$(dirname "$0")/../lib.sh"
test_init 6

# node_guid as `rdma dev` / sysfs print it: EUI-64 of the MAC (U/L bit flipped)
eui64_of() {
	local IFS=: m
	# shellcheck disable=SC2206
	m=($(cat "/sys/class/net/$1/address"))
	printf '%02x%s:%sff:fe%s:%s%s\n' $((0x${m[0]} ^ 2)) "${m[1]}" "${m[2]}" "${m[3]}" "${m[4]}" "${m[5]}"
}

link_line() { rdma link show "$1/1" 2>/dev/null; }

link_del "$DEV0" >/dev/null 2>&1
wait_for 10 not ibdev_exists "$DEV0"
base_count=$(ibdev_count)
base_udp=$(udp4791)

t_begin "rdma link add $DEV0 type $RROCE_TYPE netdev $IF0 creates the device"
if expect_ok "link add" link_add "$DEV0" "$IF0"; then
	expect_wait "$SYS_IB/$DEV0 exists" 10 ibdev_exists "$DEV0"
	expect_eq "device count" "$(ibdev_count)" $((base_count + 1))
	expect_wait "port active" 10 port_active "$DEV0"
	expect_eq "ports" "$(ls "$SYS_IB/$DEV0/ports" 2>/dev/null | tr '\n' ' ')" "1 "
	expect_eq "link_layer" "$(port_attr "$DEV0" link_layer)" Ethernet
fi
t_end

t_begin "rdma link show / rdma dev show describe $DEV0"
line=$(link_line "$DEV0")
diag "$line"
expect_eq "rdma link show" "$(echo "$line" | sed 's/^link //; s/ netdev_index.*//; s/[[:space:]]*$//')" \
	"$DEV0/1 state ACTIVE physical_state LINK_UP netdev $IF0"
expect_eq "listed in 'rdma link show'" "$(rdma link show | grep -c "^link $DEV0/1 .*netdev $IF0\b")" 1
expect_eq "node_guid (EUI-64 of $IF0 MAC)" "$(cat "$SYS_IB/$DEV0/node_guid" 2>/dev/null)" "$(eui64_of "$IF0")"
expect_eq "node_type" "$(cat "$SYS_IB/$DEV0/node_type" 2>/dev/null)" "1: CA"
t_end

t_begin "rdma link delete $DEV0 removes it"
if expect_ok "link delete" link_del "$DEV0"; then
	expect_wait "$SYS_IB/$DEV0 gone" 10 not ibdev_exists "$DEV0"
	expect_eq "listed in 'rdma link show'" "$(rdma link show | grep -c "^link $DEV0/")" 0
	expect_eq "device count" "$(ibdev_count)" "$base_count"
fi
t_end

t_begin "20 add/delete cycles"
bad=0
for i in $(seq 1 20); do
	if ! link_add "$DEV0" "$IF0" >/dev/null 2>&1; then t_fail "cycle $i: add failed"; bad=1; break; fi
	if ! wait_for 10 ibdev_exists "$DEV0"; then t_fail "cycle $i: no sysfs dir"; bad=1; break; fi
	if [ "$(link_line "$DEV0" | grep -c "netdev $IF0")" != 1 ]; then t_fail "cycle $i: not in rdma link show"; bad=1; break; fi
	if ! link_del "$DEV0" >/dev/null 2>&1; then t_fail "cycle $i: delete failed"; bad=1; break; fi
	if ! wait_for 10 not ibdev_exists "$DEV0"; then t_fail "cycle $i: still in sysfs"; bad=1; break; fi
done
[ $bad = 0 ] && diag "20 cycles done"
t_end

t_begin "nothing left behind: device count and UDP $ROCE_PORT sockets as before"
expect_eq "device count" "$(ibdev_count)" "$base_count"
expect_eq "UDP $ROCE_PORT sockets (v4 v6) in init_net" "$(udp4791)" "$base_udp"
t_end

test_done
