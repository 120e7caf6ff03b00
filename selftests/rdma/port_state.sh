#!/usr/bin/env bash
# Port state follows the netdev: admin down -> DOWN/Disabled, up -> ACTIVE/
# LinkUp; carrier loss (peer end down) -> DOWN/Polling.
. "$(dirname "$0")/../lib.sh"
test_init 7

st() { echo "$(port_attr "$1" state)|$(port_attr "$1" phys_state)"; }
is_st() { [ "$(st "$1")" = "$2" ]; }
ACTIVE="4: ACTIVE|5: LinkUp"
DISABLED="1: DOWN|3: Disabled"
POLLING="1: DOWN|2: Polling"
link_state() { rdma link show "$1/1" | sed -n 's/.*\(state [A-Z_]* physical_state [A-Z_]*\).*/\1/p'; }

t_begin "initially $DEV0 and $DEV1 are ACTIVE / LinkUp"
expect_eq "$DEV0 state|phys_state" "$(st "$DEV0")" "$ACTIVE"
expect_eq "$DEV1 state|phys_state" "$(st "$DEV1")" "$ACTIVE"
expect_eq "$DEV0 rdma link show" "$(link_state "$DEV0")" "state ACTIVE physical_state LINK_UP"
t_end

t_begin "ip link set $IF0 down -> $DEV0 DOWN / Disabled"
ip link set "$IF0" down
expect_wait "$DEV0 $DISABLED (now: $(st "$DEV0"))" 10 is_st "$DEV0" "$DISABLED" ||
	diag "$DEV0 is $(st "$DEV0")"
expect_eq "$DEV0 rdma link show" "$(link_state "$DEV0")" "state DOWN physical_state DISABLED"
t_end

t_begin "ip link set $IF0 up -> $DEV0 ACTIVE / LinkUp"
ip link set "$IF0" up
expect_wait "$DEV0 ACTIVE" 10 is_st "$DEV0" "$ACTIVE" || diag "$DEV0 is $(st "$DEV0")"
t_end

t_begin "peer end $IF1 down (carrier loss on $IF0) -> $DEV0 DOWN / Polling, $DEV1 DOWN / Disabled"
ns "$NS1" ip link set "$IF1" down
expect_wait "$IF0 carrier lost" 10 grep -qx 0 "/sys/class/net/$IF0/carrier"
expect_wait "$DEV0 $POLLING" 10 is_st "$DEV0" "$POLLING" || diag "$DEV0 is $(st "$DEV0")"
expect_wait "$DEV1 $DISABLED" 10 is_st "$DEV1" "$DISABLED" || diag "$DEV1 is $(st "$DEV1")"
t_end

t_begin "peer end $IF1 up -> both ACTIVE again"
ns "$NS1" ip link set "$IF1" up
expect_wait "$DEV0 ACTIVE" 10 is_st "$DEV0" "$ACTIVE" || diag "$DEV0 is $(st "$DEV0")"
expect_wait "$DEV1 ACTIVE" 10 is_st "$DEV1" "$ACTIVE" || diag "$DEV1 is $(st "$DEV1")"
t_end

t_begin "10 quick down/up flaps end ACTIVE"
for i in $(seq 1 10); do ip link set "$IF0" down; ip link set "$IF0" up; done
expect_wait "$DEV0 ACTIVE" 10 is_st "$DEV0" "$ACTIVE" || diag "$DEV0 is $(st "$DEV0")"
t_end

test_done
