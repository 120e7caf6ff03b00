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
# have their netdevs in init_net: a dedicated veth pair nv0 (10.79.0.1,
# rroce_nv0, host) -- nv1 (10.79.0.2, rroce_nv1, target).  Two addresses of
# one namespace normally reach each other through lo; policy routing (rules
# "to <peer> iif lo" ahead of the local table) sends the traffic out of the
# veth instead, accept_local/rp_filter let it in on the other side, and the
# neighbours are static.  The rx/tx byte counters of nv0/nv1 prove it
# crossed the veth.  Everything is undone at the end (and the standard
# topology is restored by test_done).
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
NVA=nv0 NVB=nv1 NIPA=10.79.0.1 NIPB=10.79.0.2 NPORT=4420
DEVA=${RROCE_TYPE}_nv0 DEVB=${RROCE_TYPE}_nv1
CFG=/sys/kernel/config
OUT=$RROCE_REPO/build/selftests/nvmeof
mkdir -p "$OUT"
tmo=$((30 * ${RROCE_TIMEOUT_SCALE:-1}))

why=
[ "$RROCE_TYPE" = rxe ] && why="rxe: its UDP socket and init_net-only setup differ; not run"
for m in nvmet nvmet_rdma nvme_rdma null_blk; do
	[ -n "$why" ] && break
	modinfo "$m" >/dev/null 2>&1 || why="module $m not available in this kernel"
done

ctrl= blk= nullb= rules=0 sysctl_saved=()

# sysctl_set KEY VALUE: set, remembering the old value for the teardown.
sysctl_set() {
	sysctl_saved+=("$1=$(sysctl -n "$1")")
	sysctl -qw "$1=$2"
}

setup() {
	local m mac_a mac_b
	for m in configfs nvmet nvmet_rdma nvme_rdma nvme_fabrics; do
		modprobe "$m" || { t_fail "modprobe $m"; return 1; }
	done
	# no default device: only the configfs one below
	modprobe null_blk nr_devices=0 || { t_fail "modprobe null_blk nr_devices=0"; return 1; }
	mountpoint -q "$CFG" || mount -t configfs none "$CFG" || { t_fail "mount configfs"; return 1; }
	ip link del "$NVA" 2>/dev/null
	ip link add "$NVA" type veth peer name "$NVB" || { t_fail "ip link add $NVA veth $NVB"; return 1; }
	for m in "$NVA" "$NVB"; do
		sysctl -qw "net.ipv6.conf.$m.disable_ipv6=1"
		sysctl -qw "net.ipv4.conf.$m.accept_local=1"
		sysctl -qw "net.ipv4.conf.$m.rp_filter=0"
	done
	sysctl_set net.ipv4.conf.all.rp_filter 0
	ip addr add "$NIPA/24" dev "$NVA" && ip addr add "$NIPB/24" dev "$NVB" &&
		ip link set "$NVA" up && ip link set "$NVB" up || { t_fail "addresses on $NVA/$NVB"; return 1; }
	mac_a=$(cat "/sys/class/net/$NVA/address") mac_b=$(cat "/sys/class/net/$NVB/address")
	ip neigh replace "$NIPB" lladdr "$mac_b" dev "$NVA" nud permanent &&
		ip neigh replace "$NIPA" lladdr "$mac_a" dev "$NVB" nud permanent || { t_fail "static neighbours"; return 1; }
	# locally sent traffic to the peer's address leaves through the veth
	ip route add "$NIPB" dev "$NVA" src "$NIPA" table 4791 &&
		ip route add "$NIPA" dev "$NVB" src "$NIPB" table 4792 &&
		ip rule add pref 10 to "$NIPB" iif lo lookup 4791 &&
		ip rule add pref 11 to "$NIPA" iif lo lookup 4792 &&
		ip rule add pref 100 lookup local && ip rule del pref 0 lookup local || { t_fail "policy routing"; return 1; }
	rules=1
	link_add "$DEVA" "$NVA" && link_add "$DEVB" "$NVB" || { t_fail "rdma link add $DEVA/$DEVB"; return 1; }
	wait_for 10 port_active "$DEVA" && wait_for 10 port_active "$DEVB" ||
		{ t_fail "ports not active: $(port_state "$DEVA") / $(port_state "$DEVB")"; return 1; }
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
	local s=$CFG/nvmet/subsystems/$NQN p=$CFG/nvmet/ports/1 kv
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
	ibdev_exists "$DEVA" && rdma link delete "$DEVA"
	ibdev_exists "$DEVB" && rdma link delete "$DEVB"
	ip link del "$NVA" 2>/dev/null
	if [ "$rules" = 1 ]; then
		ip rule add pref 0 lookup local
		ip rule del pref 100 lookup local
		ip rule del pref 10 2>/dev/null
		ip rule del pref 11 2>/dev/null
		ip route flush table 4791 2>/dev/null
		ip route flush table 4792 2>/dev/null
		rules=0
	fi
	for kv in "${sysctl_saved[@]}"; do sysctl -qw "$kv"; done
	sysctl_saved=()
	for m in nvme_rdma nvmet_rdma nvmet null_blk; do modprobe -r "$m" 2>/dev/null; done
	return 0
}
trap teardown EXIT

nvme_blocks() { ls /sys/block 2>/dev/null | grep '^nvme' | sort; }

t_begin "setup: veth $NVA/$NVB in init_net (policy routing over the veth), $DEVA/$DEVB, null_blk, nvmet rdma port"
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

# ctr NETDEV rx|tx: byte counter
ctr() { cat "/sys/class/net/$1/statistics/$2_bytes"; }
[ -z "$why" ] && { a_tx0=$(ctr "$NVA" tx) a_rx0=$(ctr "$NVA" rx); }
total=0

# xfer DESC BS COUNT SEEK: write COUNT blocks of BS at block SEEK with
# O_DIRECT, read them back with O_DIRECT, compare.
xfer() {
	local desc=$1 bs=$2 count=$3 seek=$4 pat=$OUT/pat.$2.$3 got=$OUT/got.$2.$3
	t_begin "$desc"
	if [ -n "$why" ]; then t_skip "$why"; return; fi
	head -c $((bs * count)) /dev/urandom >"$pat"
	if ! timeout "$tmo" dd if="$pat" of="$blk" bs="$bs" count="$count" seek="$seek" oflag=direct conv=notrunc status=none; then
		t_fail "dd write to $blk failed"
	elif ! timeout "$tmo" dd if="$blk" of="$got" bs="$bs" count="$count" skip="$seek" iflag=direct status=none; then
		t_fail "dd read from $blk failed"
	elif ! cmp "$pat" "$got"; then
		t_fail "read back differs: $(cmp "$pat" "$got" 2>&1 | head -1)"
	else
		total=$((total + 2 * bs * count))
	fi
	rm -f "$pat" "$got"
	t_end
}

# One subtest per size; 1 MiB I/Os take 256 MR pages each.
xfer "O_DIRECT write+read 4 KiB at 0, compared byte for byte" 4096 1 0
xfer "O_DIRECT write+read 64 KiB at 192 KiB, compared byte for byte" 65536 1 3
xfer "O_DIRECT write+read 1 MiB at 8 MiB, compared byte for byte" 1048576 1 8
xfer "O_DIRECT write+read 4 MiB (bs=1M) at 16 MiB, compared byte for byte" 1048576 4 16

t_begin "the data crossed the veth ($NVA counters cover the I/O), FR registration in use, no completion errors, no ICRC errors"
if [ -n "$why" ]; then
	t_skip "$why"
else
	d_tx=$(($(ctr "$NVA" tx) - a_tx0)) d_rx=$(($(ctr "$NVA" rx) - a_rx0))
	diag "$NVA: tx $d_tx B, rx $d_rx B for $total B written and read"
	[ $((d_tx + d_rx)) -ge "$total" ] || t_fail "only $((d_tx + d_rx)) B on $NVA for $total B of I/O"
	[ "$d_tx" -gt 0 ] && [ "$d_rx" -gt 0 ] || t_fail "one direction saw no traffic"
	# nvme-rdma registers every data buffer with IB_WR_REG_MR unless
	# register_always is off (then it may use the PD's global rkey)
	ra=$(cat /sys/module/nvme_rdma/parameters/register_always 2>/dev/null)
	[ "$ra" = Y ] || t_fail "nvme_rdma register_always is '$ra', not Y: FRWR not exercised"
	for d in "$DEVA" "$DEVB"; do
		c=$(hwc_dir "$d")
		diag "$d: $(for n in tx_packets rx_packets completion_errors rx_icrc_errors retransmits; do printf '%s %s ' "$n" "$(cat "$c/$n" 2>/dev/null)"; done)"
		[ "$(cat "$c/completion_errors" 2>/dev/null)" = 0 ] || t_fail "$d: completion_errors $(cat "$c/completion_errors" 2>/dev/null)"
		[ "$(cat "$c/rx_icrc_errors" 2>/dev/null)" = 0 ] || t_fail "$d: rx_icrc_errors $(cat "$c/rx_icrc_errors" 2>/dev/null)"
	done
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
