#!/usr/bin/env bash
# rmmod with live devices: either succeeds and takes the devices and sockets
# with it, or is refused cleanly (devices intact).  Re-insmod works and
# devices can be re-added.  rmmod while a process holds the device open must
# not hang: rroce cuts the process off (disassociate_ucontext); rxe refuses
# (module in use).
. "$(dirname "$0")/../lib.sh"
test_init 7

# rescuers: how many threads are the rescuer of rroce's workqueue (named
# after it): the QPs' work items run on a WQ_MEM_RECLAIM workqueue of the
# module's own, which has one while the module is loaded.
rescuers() { cat /proc/[0-9]*/comm 2>/dev/null | grep -cx "kworker/R-$MOD"; }

pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; }
trap cleanup EXIT

t_begin "rmmod $MOD with $DEV0 and $DEV1 live"
out=$(timeout 60 rmmod "$MOD" 2>&1)
rc=$?
if [ $rc = 0 ]; then
	diag "rmmod succeeded"
	expect_wait "module gone" 10 not drv_loaded
	expect_eq "$DEV0 gone" "$(ibdev_exists "$DEV0" && echo present || echo gone)" gone
	expect_eq "$DEV1 gone" "$(ibdev_exists "$DEV1" && echo present || echo gone)" gone
	expect_eq "UDP $ROCE_PORT sockets in init_net" "$(udp4791)" "0 0"
	expect_eq "UDP $ROCE_PORT sockets in $NS1" "$(udp4791 "$NS1")" "0 0"
	[ "$RROCE_TYPE" = rroce ] && expect_eq "workqueue rescuer threads" "$(rescuers)" 0
elif [ $rc = 124 ]; then
	t_fail "rmmod hung (>60 s)"
else
	diag "rmmod refused (rc $rc): $out"
	expect_ok "module still loaded" drv_loaded
	expect_ok "$DEV0 intact" port_active "$DEV0"
	expect_ok "$DEV1 intact" port_active "$DEV1"
	links_del_all
	expect_ok "rmmod after deleting the devices" rmmod "$MOD"
fi
t_end

t_begin "re-load $MOD: no devices appear by themselves"
before=$(ibdev_count)
expect_ok "load" drv_load
expect_eq "device count" "$(ibdev_count)" "$before"
t_end

t_begin "the QPs' work items have a workqueue with a rescuer thread (WQ_MEM_RECLAIM)"
if [ "$RROCE_TYPE" != rroce ]; then
	t_skip "rroce's own workqueue"
else
	expect_eq "threads named kworker/R-$MOD" "$(rescuers)" 1
	t_end
fi

t_begin "devices can be re-added and are ACTIVE"
expect_ok "links_add" links_add
expect_wait "$DEV0 ACTIVE" 10 port_active "$DEV0"
expect_wait "$DEV1 ACTIVE" 10 port_active "$DEV1"
expect_eq "UDP $ROCE_PORT sockets in $NS1" "$(udp4791 "$NS1")" "1 1"
t_end

t_begin "rmmod with no devices, then load again"
links_del_all
expect_ok "rmmod" timeout 60 rmmod "$MOD"
expect_ok "load" drv_load
expect_ok "links_add" links_add
t_end

t_begin "rmmod while a process has $DEV0 open does not hang"
why=$(provider_unavailable)
idx=$(gid_index_v4 "$DEV0")
if [ -n "$why" ] || ! command -v ibv_rc_pingpong >/dev/null; then
	t_skip "${why:-ibv_rc_pingpong missing}"
elif [ -z "$idx" ]; then
	t_fail "no RoCE v2 GID for $IP0 on $DEV0"; t_end
else
	# a server that opens the device, makes a QP and waits for a client
	ibv_rc_pingpong -d "$DEV0" -g "$idx" -p 18599 >/tmp/pp.$$ 2>&1 &
	pid=$!
	# wait until it has the uverbs device open
	expect_wait "server opened the device" 10 bash -c "ls -l /proc/$pid/fd 2>/dev/null | grep -q /dev/infiniband/uverbs"
	out=$(timeout 60 rmmod "$MOD" 2>&1)
	rc=$?
	if [ $rc = 124 ]; then
		t_fail "rmmod hung while the device was open"
	elif [ $rc = 0 ]; then
		# disassociate_ucontext: the server (blocked in accept(), waiting
		# for a client) has lost the device; it must still die normally
		diag "rmmod succeeded with the device open (disassociate)"
		kill "$pid" 2>/dev/null
		expect_wait "server gone after SIGTERM" 20 not kill -0 "$pid"
	else
		diag "rmmod refused while in use (rc $rc): $out"
		[ "$RROCE_TYPE" = rroce ] && t_fail "rroce has disassociate_ucontext: rmmod must not be refused"
		expect_ok "$DEV0 intact" port_active "$DEV0"
	fi
	kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; pid=
	diag "server: $(tr '\n' ' ' </tmp/pp.$$)"; rm -f /tmp/pp.$$
	# whatever happened, the module must come back to a working state
	drv_loaded || expect_ok "reload" drv_load
	expect_ok "links_add" links_add
	expect_wait "$DEV0 ACTIVE" 10 port_active "$DEV0"
	t_end
fi

test_done
