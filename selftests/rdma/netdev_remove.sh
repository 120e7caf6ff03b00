#!/usr/bin/env bash
# Removing the netdev (or the whole namespace) under a live device removes
# the ib device and its UDP socket, without a splat; the topology can be
# rebuilt afterwards.
. "$(dirname "$0")/../lib.sh"
test_init 6

base_udp_init=$(udp4791)

t_begin "ip link del $IF0 with $DEV0 live -> $DEV0 and $DEV1 disappear"
expect_ok "ip link del $IF0" timeout 60 ip link del "$IF0"
expect_wait "$DEV0 gone" 10 not ibdev_exists "$DEV0"
expect_wait "$DEV1 gone (its veth peer $IF1 went too)" 10 not ibdev_exists "$DEV1"
expect_eq "rdma link show entries" "$(rdma link show | grep -cE "^link ($DEV0|$DEV1)/")" 0
t_end

t_begin "no UDP $ROCE_PORT socket left in netns $NS1"
expect_eq "UDP $ROCE_PORT sockets in $NS1" "$(udp4791 "$NS1")" "0 0"
if [ "$RROCE_TYPE" = rroce ]; then
	expect_eq "UDP $ROCE_PORT sockets in init_net" "$(udp4791)" "0 0"
fi
t_end

t_begin "topology and devices can be recreated"
expect_ok "topo_setup" topo_setup
expect_ok "links_add" links_add
expect_wait "$DEV0 ACTIVE" 10 port_active "$DEV0"
expect_wait "$DEV1 ACTIVE" 10 port_active "$DEV1"
expect_eq "UDP $ROCE_PORT sockets in init_net" "$(udp4791)" "$base_udp_init"
t_end

t_begin "ip netns del $NS1 with $DEV1 live -> $DEV1 (and $DEV0) disappear"
expect_ok "ip netns del $NS1" timeout 60 ip netns del "$NS1"
expect_wait "$DEV1 gone" 20 not ibdev_exists "$DEV1"
expect_wait "$DEV0 gone ($IF0 dies with its peer)" 20 not ibdev_exists "$DEV0"
t_end

t_begin "topology and devices can be recreated after netns removal"
expect_ok "topo_setup" topo_setup
expect_ok "links_add" links_add
expect_wait "$DEV0 ACTIVE" 10 port_active "$DEV0"
expect_wait "$DEV1 ACTIVE" 10 port_active "$DEV1"
t_end

test_done
