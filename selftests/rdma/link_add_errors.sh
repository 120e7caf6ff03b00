#!/usr/bin/env bash
# Bad `rdma link add` requests fail and leave nothing half-made: no new
# device, no extra UDP socket, the existing device untouched.  Among them
# a VLAN netdev (EPERM, as rdma_rxe).
. "$(dirname "$0")/../lib.sh"
test_init 10

X0=${RROCE_TYPE}x0
cleanup() { ip link del rrx0.100 2>/dev/null; ip link del rrx0 2>/dev/null; }
trap cleanup EXIT
ip link del rrx0 2>/dev/null
ip link add rrx0 type veth peer name rrx1 && ip link set rrx0 up && ip link set rrx1 up

base_count=$(ibdev_count)
base_udp=$(udp4791)
unchanged() {
	expect_eq "device count" "$(ibdev_count)" "$base_count"
	expect_eq "UDP $ROCE_PORT sockets (v4 v6)" "$(udp4791)" "$base_udp"
	expect_ok "$DEV0 still ACTIVE" port_active "$DEV0"
	expect_eq "$DEV0 still on $IF0" "$(rdma link show "$DEV0/1" | grep -o "netdev [^ ]*")" "netdev $IF0"
}
no_dev_on() { expect_eq "ib devices on $1" "$(rdma link show | grep -c "netdev $1\b")" 0; }

t_begin "unknown netdev: rdma link add $X0 ... netdev nosuchdev fails"
expect_fail "link add" link_add "$X0" nosuchdev
expect_eq "$X0 exists" "$(ibdev_exists "$X0" && echo yes || echo no)" no
unchanged
t_end

t_begin "duplicate name: rdma link add $DEV0 ... netdev rrx0 fails"
expect_fail "link add" link_add "$DEV0" rrx0
no_dev_on rrx0
unchanged
t_end

t_begin "same netdev twice: rdma link add $X0 ... netdev $IF0 fails"
expect_fail "link add" link_add "$X0" "$IF0"
expect_eq "$X0 exists" "$(ibdev_exists "$X0" && echo yes || echo no)" no
expect_eq "devices on $IF0" "$(rdma link show | grep -c "netdev $IF0\b")" 1
unchanged
t_end

t_begin "netdev of another namespace: rdma link add $X0 ... netdev $IF1 from init_net fails"
expect_fail "link add" link_add "$X0" "$IF1"
expect_eq "$X0 exists" "$(ibdev_exists "$X0" && echo yes || echo no)" no
unchanged
t_end

t_begin "VLAN netdev: rdma link add $X0 ... netdev rrx0.100 fails (as rdma_rxe: no GIDs for its addresses)"
if ip link add link rrx0 name rrx0.100 type vlan id 100 2>/dev/null; then
	ip link set rrx0.100 up
	expect_fail "link add" link_add "$X0" rrx0.100
	expect_eq "$X0 exists" "$(ibdev_exists "$X0" && echo yes || echo no)" no
	no_dev_on rrx0.100
	unchanged
	ip link del rrx0.100
	t_end
else
	t_skip "no 8021q support in this kernel"
fi

t_begin "unknown link type fails"
expect_fail "link add" rdma link add "$X0" type nosuchtype netdev rrx0
no_dev_on rrx0
unchanged
t_end

t_begin "name with %d is refused"
expect_fail "link add" link_add "${RROCE_TYPE}%d" rrx0
no_dev_on rrx0
unchanged
t_end

t_begin "after the failures a good add on rrx0 works, delete restores the count"
expect_ok "link add" link_add "$X0" rrx0
expect_wait "$X0 exists" 10 ibdev_exists "$X0"
expect_eq "device count" "$(ibdev_count)" $((base_count + 1))
expect_ok "link delete" link_del "$X0"
expect_wait "$X0 gone" 10 not ibdev_exists "$X0"
unchanged
t_end

t_begin "deleting a device that does not exist fails, nothing changes"
expect_fail "link delete" rdma link delete "${RROCE_TYPE}nosuch"
unchanged
t_end

test_done
