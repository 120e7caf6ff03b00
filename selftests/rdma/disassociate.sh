#!/usr/bin/env bash
# A device that goes away while a process uses it (disassociate_ucontext):
# the removal completes at once instead of waiting for the process to close
# the device, and the process is cut off cleanly (py/disassociate.py: RC
# WRITE traffic on the device's loopback, 16 MiB pinned; then
# IBV_EVENT_DEVICE_FATAL, pages unpinned while it still runs, EIO from the
# kernel verbs, destroy/close succeed, exit 0).
#   1  `rdma link delete` of an extra device (rroce_dx on a veth)
#   2  the same with the process's send queue full of WRITEs and none of
#      their completions polled: the successful ones still in the CQ are of
#      WRITEs whose data landed, and polling fails once the CQ is empty
#   3  `ip link del` of that device's netdev
#   4  `rmmod` of the driver with a process on $DEV0 (the module is not
#      pinned by open files any more); re-insmod works
#   5  a fresh transfer on the standard devices afterwards
# kmemleak (check_dmesg) must find nothing.
# selftest-timeout=600
# shellcheck source-path=SCRIPTDIR source=../lib.sh
. "$(dirname "$0")/../lib.sh"
test_init 6

pid=
out=/tmp/disassociate.$$
cleanup() {
	[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
	rm -f "$out"
	rdma link delete rroce_dx 2>/dev/null
	ip link del rrdx0 2>/dev/null
}
trap cleanup EXIT

why=
[ "$RROCE_TYPE" = rroce ] || why="rdma_rxe has no disassociate_ucontext (removal waits for the process)"
[ -z "$why" ] && why=$(provider_unavailable)
[ -z "$why" ] && why=$(datapath_unavailable)
if [ -n "$why" ]; then
	while [ "$_t_num" -lt $((_t_plan - 1)) ]; do ktap_skip "$TEST_NAME" "$why"; done
	test_done
fi

dx_setup() { # an extra device rroce_dx on the veth rrdx0 (10.79.0.1)
	ip link del rrdx0 2>/dev/null
	ip link add rrdx0 type veth peer name rrdx1 && ip link set rrdx0 up && ip link set rrdx1 up &&
		ip addr add 10.79.0.1/24 dev rrdx0 && rdma link add rroce_dx type rroce netdev rrdx0 &&
		wait_for 10 port_active rroce_dx && wait_for 10 gid_present rroce_dx "$(gid_of 10.79.0.1)"
}

# cut_off DEV GID_INDEX WHAT CMD...: run py/disassociate.py on DEV (with
# the mode $DX_MODE, if set), run CMD once it is in traffic; CMD must
# finish within 30 s (it used to wait for the process) and the process must
# pass its checks and exit.
cut_off() {
	local dev=$1 idx=$2 what=$3 t rc l
	shift 3
	bg_logged "$out" timeout $((240 * ${RROCE_TIMEOUT_SCALE:-1})) /usr/bin/python3 \
		"$RROCE_REPO/selftests/py/disassociate.py" "$dev" "$idx" ${DX_MODE:+"$DX_MODE"}
	pid=$!
	if ! wait_for 60 has_line "$out" '^ready'; then
		t_fail "the process did not get into traffic on $dev"
		while IFS= read -r l; do diag "$l"; done <"$out"
		kill -9 "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		pid=
		return 1
	fi
	sleep 1
	t=$EPOCHSECONDS
	timeout $((60 * ${RROCE_TIMEOUT_SCALE:-1})) "$@"
	rc=$?
	t=$((EPOCHSECONDS - t))
	diag "$what returned $rc after $t s"
	expect_eq "$what exit status" "$rc" 0
	[ "$t" -le $((30 * ${RROCE_TIMEOUT_SCALE:-1})) ] || t_fail "$what took $t s with the device in use"
	expect_wait "$dev gone" 20 not ibdev_exists "$dev"
	wait_for 120 not kill -0 "$pid" || t_fail "the process did not finish after the removal"
	kill -9 "$pid" 2>/dev/null
	wait "$pid"
	rc=$?
	pid=
	while IFS= read -r l; do diag "$l"; done <"$out"
	expect_eq "disassociate.py exit status" "$rc" 0
	grep -q '^not ok' "$out" && t_fail "a check of disassociate.py failed"
	return 0
}

# 1
t_begin "rdma link delete with a process in RC traffic on the device: returns at once, the process is cut off cleanly"
if ! dx_setup; then
	t_fail "cannot set up rroce_dx on rrdx0"
else
	cut_off rroce_dx "$(gid_index rroce_dx "$(gid_of 10.79.0.1)")" "rdma link delete rroce_dx" \
		rdma link delete rroce_dx
fi
t_end

# 2
t_begin "rdma link delete with the send queue full and no completion polled: those in the CQ are of WRITEs that landed, then polling fails"
if ! dx_setup; then
	t_fail "cannot set up rroce_dx on rrdx0"
else
	DX_MODE=unpolled cut_off rroce_dx "$(gid_index rroce_dx "$(gid_of 10.79.0.1)")" "rdma link delete rroce_dx" \
		rdma link delete rroce_dx
	grep -q "^# [1-9][0-9]* completions left in the CQ" "$out" || t_fail "no completion was left in the CQ"
fi
t_end

# 3
t_begin "ip link del of the netdev with a process in RC traffic on the device: returns at once, the process is cut off"
base_udp=$(udp4791)
if ! dx_setup; then
	t_fail "cannot set up rroce_dx on rrdx0"
else
	cut_off rroce_dx "$(gid_index rroce_dx "$(gid_of 10.79.0.1)")" "ip link del rrdx0" ip link del rrdx0
	expect_wait "UDP $ROCE_PORT sockets back to $base_udp" 10 test "$(udp4791)" = "$base_udp"
fi
t_end

# 4
t_begin "rmmod $MOD with a process in RC traffic on $DEV0: succeeds at once, the process is cut off; reload works"
cut_off "$DEV0" "$(gid_index "$DEV0" "$(gid_of "$IP0")")" "rmmod $MOD" rmmod "$MOD"
expect_ok "module gone" not drv_loaded
expect_ok "reload and re-add the standard devices" topo_reset
expect_wait "$DEV0 ACTIVE" 10 port_active "$DEV0"
t_end

# 5
rc_xfer_setup
t_fresh_xfer "after the removals"

test_done
