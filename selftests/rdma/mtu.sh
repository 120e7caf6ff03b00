#!/usr/bin/env bash
# active_mtu follows the netdev MTU.  Rule (rroce): include/rdma/ib_addr.h
# iboe_get_mtu(): the largest IB MTU (256..4096) that fits in the netdev MTU
# minus 96 bytes of RoCEv2 headers.  rxe (for validating the test): minus 80,
# at least 256.  Read through libibverbs (ibv_devinfo), so needs the provider.
. "$(dirname "$0")/../lib.sh"
mtus="1500 9000 1280 1120 1119 2144 2143 4192 4191 576"
test_init 12

expected() {
	case $(roce_mtu "$1") in 256) echo "256 (1)" ;; 512) echo "512 (2)" ;; 1024) echo "1024 (3)" ;;
		2048) echo "2048 (4)" ;; 4096) echo "4096 (5)" ;; esac
}
active_mtu() { ibv_devinfo -d "$1" 2>/dev/null | awk '/active_mtu:/ { print $2, $3 }'; }
mtu_is() { [ "$(active_mtu "$1")" = "$2" ]; }

why=$(provider_unavailable)
if [ -n "$why" ]; then
	for m in $mtus; do ktap_skip "mtu $m" "$why"; done
	ktap_skip "max_mtu" "$why"
	test_done
fi

for m in $mtus; do
	want=$(expected "$m")
	t_begin "ip link set $IF0 mtu $m -> active_mtu $want"
	if expect_ok "set mtu" ip link set "$IF0" mtu "$m"; then
		expect_wait "active_mtu $want (now '$(active_mtu "$DEV0")')" 10 mtu_is "$DEV0" "$want" ||
			diag "active_mtu is '$(active_mtu "$DEV0")'"
	fi
	t_end
done
ip link set "$IF0" mtu 1500

t_begin "max_mtu is 4096 (5) and active_mtu back to 1024 (3) at 1500"
expect_eq "max_mtu" "$(ibv_devinfo -d "$DEV0" | awk '/max_mtu:/ { print $2, $3 }')" "4096 (5)"
expect_wait "active_mtu 1024 (3)" 10 mtu_is "$DEV0" "1024 (3)"
t_end

test_done
