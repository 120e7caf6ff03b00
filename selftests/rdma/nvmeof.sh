#!/usr/bin/env bash
# NVMe over Fabrics (RDMA) across two rroce devices: the kernel's NVMe
# target (nvmet, nvmet-rdma) exports a memory-backed null_blk namespace on
# one device, the kernel's NVMe host (nvme-rdma) connects from the other,
# and data written and read with O_DIRECT dd must come back byte for byte.
# nvme-rdma registers every I/O buffer with fast registration (IB_WR_REG_MR
# on an ib_alloc_mr MR), the target answers with SEND_WITH_INV (remote
# invalidation of that MR) and the host falls back to LOCAL_INV, so this is
# the kernel-consumer test of FRWR.
#
# nvmet and nvme-rdma use rdma_cm in init_net only, so both devices must
# have their netdevs in init_net: lib.sh's veth pair (vl_up), host on
# $VL_DEVA, target on $VL_DEVB.  Its byte counters prove the I/O crossed
# the veth.  Everything is undone at the end.
#
# Subtests: setup (modules, veth, devices, null_blk, nvmet port and
# subsystem); connect through /dev/nvme-fabrics (no nvme-cli needed) and
# the namespace appears; dd O_DIRECT writes of 4 KiB, 64 KiB at an offset,
# 1 MiB and 4 MiB (bs=1M) read back and compared; the traffic crossed
# nv0/nv1 (counters), nvme-rdma registered with FRWR (register_always),
# no completion or ICRC errors on either device; disconnect; teardown;
# dmesg.
. "$(dirname "$0")/../lib.sh"
test_init 9

NQN=nqn.2026-11.org.rroce:nvmeof-selftest
HOSTNQN=nqn.2026-11.org.rroce:host
HOSTID=2d0b1e5c-7a64-4f3e-9c55-5e2f0d6a4791
NIPA=$VL_IPA NIPB=$VL_IPB NPORT=4420
DEVA=$VL_DEVA DEVB=$VL_DEVB
CFG=/sys/kernel/config
OUT=$RROCE_REPO/build/selftests/nvmeof
mkdir -p "$OUT"
tmo=$((30 * ${RROCE_TIMEOUT_SCALE:-1}))

why=
[ "$RROCE_TYPE" = rxe ] && why="rxe: its UDP socket and init_net-only setup differ; not run"
[ -n "$why" ] || why=$(ulp_why nvmet nvmet_rdma nvme_rdma null_blk)

ctrl= blk= nullb=

setup() {
	local m
	for m in configfs nvmet nvmet_rdma nvme_rdma nvme_fabrics; do
		modprobe "$m" || { t_fail "modprobe $m"; return 1; }
	done
	# no default device: only the configfs one below
	modprobe null_blk nr_devices=0 || { t_fail "modprobe null_blk nr_devices=0"; return 1; }
	mountpoint -q "$CFG" || mount -t configfs none "$CFG" || { t_fail "mount configfs"; return 1; }
	vl_up || return 1
	# a 64 MiB memory-backed null_blk (plain null_blk does not store data)
	local nb0 bdev
	nb0=$(ls /sys/block)
	nullb=$CFG/nullb/nvmeof$$
	mkdir "$nullb" && echo 1 >"$nullb/memory_backed" && echo 64 >"$nullb/size" &&
		echo 4096 >"$nullb/blocksize" && echo 1 >"$nullb/power" || { t_fail "null_blk via configfs"; return 1; }
	# (named nullbN or after the configfs directory, depending on the kernel)
	nb_new() { comm -13 <(printf '%s\n' "$nb0") <(ls /sys/block) | head -1; }
	nb_appeared() { [ -n "$(nb_new)" ] && [ -b "/dev/$(nb_new)" ]; }
	wait_for 10 nb_appeared || { t_fail "no null_blk block device appeared: $(ls /sys/block | tr '\n' ' ')"; return 1; }
	bdev=/dev/$(nb_new)
	local s=$CFG/nvmet/subsystems/$NQN p=$CFG/nvmet/ports/1
	mkdir "$s" && echo 1 >"$s/attr_allow_any_host" && mkdir "$s/namespaces/1" &&
		echo -n "$bdev" >"$s/namespaces/1/device_path" && echo 1 >"$s/namespaces/1/enable" ||
		{ t_fail "nvmet subsystem $NQN with $bdev"; return 1; }
	mkdir "$p" && echo rdma >"$p/addr_trtype" && echo ipv4 >"$p/addr_adrfam" &&
		echo "$NIPB" >"$p/addr_traddr" && echo "$NPORT" >"$p/addr_trsvcid" &&
		ln -s "$s" "$p/subsystems/$NQN" || { t_fail "nvmet rdma port $NIPB:$NPORT"; return 1; }
	diag "target: $NQN ns 1 = $bdev on $NIPB:$NPORT ($DEVB), host $NIPA ($DEVA)"
}

teardown() {
	local s=$CFG/nvmet/subsystems/$NQN p=$CFG/nvmet/ports/1
	[ -n "$ctrl" ] && [ -e "/sys/class/nvme/$ctrl/delete_controller" ] &&
		echo 1 >"/sys/class/nvme/$ctrl/delete_controller"
	[ -L "$p/subsystems/$NQN" ] && rm "$p/subsystems/$NQN"
	[ -d "$p" ] && rmdir "$p"
	[ -d "$s/namespaces/1" ] && { echo 0 >"$s/namespaces/1/enable"; rmdir "$s/namespaces/1"; }
	[ -d "$s" ] && rmdir "$s"
	if [ -n "$nullb" ] && [ -d "$nullb" ]; then
		echo 0 >"$nullb/power"
		rmdir "$nullb"
	fi
	vl_down
	for m in nvme_rdma nvmet_rdma nvmet null_blk; do modprobe -r "$m" 2>/dev/null; done
	return 0
}
trap teardown EXIT

nvme_blocks() { ls /sys/block 2>/dev/null | grep '^nvme' | sort; }

t_begin "setup: veth $VL_A/$VL_B in init_net (policy routing over the veth), $DEVA/$DEVB, null_blk, nvmet rdma port"
if [ -n "$why" ]; then t_skip "$why"; else setup; t_end; fi
[ "$_t_err" = 0 ] || why=${why:-setup failed}

t_begin "connect nvme-rdma through /dev/nvme-fabrics ($NIPA -> $NIPB): a controller and its namespace appear"
if [ -n "$why" ]; then
	t_skip "$why"
else
	before=$(nvme_blocks)
	modprobe nvme_fabrics 2>/dev/null
	exec 7<>/dev/nvme-fabrics &&
		echo "transport=rdma,traddr=$NIPB,trsvcid=$NPORT,nqn=$NQN,host_traddr=$NIPA,hostnqn=$HOSTNQN,hostid=$HOSTID" >&7 &&
		read -r -t "$tmo" reply <&7
	rc=$?
	exec 7>&-
	diag "/dev/nvme-fabrics: rc $rc, '$reply'"
	inst=$(sed -n 's/.*instance=\([0-9]*\).*/\1/p' <<<"$reply")
	if [ -z "$inst" ]; then
		t_fail "connect failed: $(dmesg | grep -i nvme | tail -3 | tr '\n' ' ')"
	else
		ctrl=nvme$inst
		new() { comm -13 <(printf '%s\n' "$before") <(nvme_blocks) | head -1; }
		has_new() { [ -n "$(new)" ]; }
		if wait_for "$tmo" has_new; then
			blk=/dev/$(new)
			diag "controller $ctrl ($(cat /sys/class/nvme/$ctrl/transport 2>/dev/null) $(cat /sys/class/nvme/$ctrl/address 2>/dev/null | tr '\n' ' ')), namespace $blk, $(($(cat /sys/block/${blk#/dev/}/size) / 2048)) MiB"
			wait_for 10 test -b "$blk" || t_fail "$blk is not a block device"
		else
			t_fail "no namespace block device appeared within ${tmo}s"
		fi
	fi
	t_end
fi
[ -n "$blk" ] || why=${why:-not connected}

[ -z "$why" ] && vl_mark
BLK_XFER_TOTAL=0
# One subtest per size; 1 MiB I/Os take 256 MR pages each.
blk_xfers "$blk"

t_begin "the data crossed the veth ($VL_A counters cover the I/O), FR registration in use, no completion errors, no ICRC errors"
if [ -n "$why" ]; then
	t_skip "$why"
else
	vl_covers "$BLK_XFER_TOTAL"
	# nvme-rdma registers every data buffer with IB_WR_REG_MR unless
	# register_always is off (then it may use the PD's global rkey)
	ra=$(cat /sys/module/nvme_rdma/parameters/register_always 2>/dev/null)
	[ "$ra" = Y ] || t_fail "nvme_rdma register_always is '$ra', not Y: FRWR not exercised"
	devs_clean "$DEVA" "$DEVB"
	t_end
fi

t_begin "disconnect ($ctrl) and tear down target, devices and routing"
if [ -n "$why" ] && [ -z "$ctrl" ]; then
	teardown
	t_skip "$why"
else
	if [ -n "$ctrl" ]; then
		echo 1 >"/sys/class/nvme/$ctrl/delete_controller" || t_fail "delete_controller"
		wait_for "$tmo" not test -e "/sys/class/nvme/$ctrl" || t_fail "$ctrl still there"
		ctrl=
	fi
	teardown
	ibdev_exists "$DEVA" && t_fail "$DEVA still there"
	ip rule show | grep -q "lookup local" || t_fail "no local rule left"
	t_end
fi
trap - EXIT

test_done
