#!/usr/bin/env bash
# Two devices in two namespaces: each namespace has UDP 4791 (IPv4 and IPv6)
# bound exactly while a device of ours lives there.  (Fails on rxe, whose
# socket lives in init_net for as long as the module is loaded.)
. "$(dirname "$0")/../lib.sh"
test_init 8

X0=${RROCE_TYPE}x0
expect_udp() { expect_eq "UDP $ROCE_PORT sockets (v4 v6) in ${2:-init_net}" "$(udp4791 ${2:+"$2"})" "$1"; }

t_begin "$DEV0 on $IF0 (init_net) and $DEV1 on $IF1 (netns $NS1) both exist"
expect_eq "$DEV0 link" "$(rdma link show "$DEV0/1" | grep -o "netdev [^ ]*")" "netdev $IF0"
expect_eq "$DEV1 link seen from $NS1" "$(ns "$NS1" rdma link show "$DEV1/1" | grep -o "netdev [^ ]*")" "netdev $IF1"
expect_ok "$DEV1 visible from init_net" ibdev_exists "$DEV1"
diag "rdma system: $(rdma system show 2>&1 | tr '\n' ' ')"
t_end

t_begin "UDP $ROCE_PORT bound in both namespaces"
expect_udp "1 1"
expect_udp "1 1" "$NS1"
t_end

t_begin "delete $DEV1 -> $NS1 unbinds $ROCE_PORT, init_net keeps it"
expect_ok "link delete" link_del "$DEV1"
expect_wait "$DEV1 gone" 10 not ibdev_exists "$DEV1"
expect_udp "0 0" "$NS1"
expect_udp "1 1"
t_end

t_begin "delete $DEV0 -> init_net unbinds $ROCE_PORT"
expect_ok "link delete" link_del "$DEV0"
expect_wait "$DEV0 gone" 10 not ibdev_exists "$DEV0"
expect_udp "0 0"
expect_udp "0 0" "$NS1"
t_end

t_begin "re-add $DEV1 only -> bound in $NS1 only"
expect_ok "link add" link_add "$DEV1" "$IF1" "$NS1"
expect_udp "1 1" "$NS1"
expect_udp "0 0"
t_end

t_begin "re-add $DEV0 -> bound in both"
expect_ok "link add" link_add "$DEV0" "$IF0"
expect_udp "1 1"
expect_udp "1 1" "$NS1"
t_end

t_begin "two devices in one namespace share the socket until the last goes"
ip link del rrx0 2>/dev/null
expect_ok "veth rrx0" ip link add rrx0 type veth peer name rrx1
ip link set rrx0 up; ip link set rrx1 up
expect_ok "link add $X0" link_add "$X0" rrx0
expect_udp "1 1"
expect_ok "link delete $DEV0" link_del "$DEV0"
expect_wait "$DEV0 gone" 10 not ibdev_exists "$DEV0"
expect_udp "1 1"
expect_ok "link delete $X0" link_del "$X0"
expect_wait "$X0 gone" 10 not ibdev_exists "$X0"
expect_udp "0 0"
ip link del rrx0
expect_ok "link add $DEV0" link_add "$DEV0" "$IF0"
expect_udp "1 1"
t_end

test_done
