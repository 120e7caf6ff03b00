# Guest-side setup for scripts/vm; sourced (as root, in the guest) before the
# command runs, so its exports reach the command.
# shellcheck shell=bash
#
# 1. Loads ib_uverbs & co. and rroce.ko (if built; RROCE_NO_INSMOD=1 skips).
#    rdma_rxe is NOT loaded (it would bind UDP 4791 in init_net).
# 2. Makes the rroce provider visible to libibverbs: a tmpfs copy of
#    /etc/libibverbs.d plus rroce.driver ("driver <repo>/build/lib/librroce",
#    or the library RROCE_PROVIDER names,
#    libibverbs appends -rdmav34.so) is bind-mounted over /etc/libibverbs.d,
#    so it works for every program, also ones that clean their environment.
#    The host is untouched (the guest root is an overlay anyway).
# 3. Standard topology (selftests/lib.sh topo_setup):
#      rr0  init_net      10.77.0.1/24 fd77::1/64  <- rroce0
#      rr1  netns "peer"  10.77.0.2/24 fd77::2/64  <- rroce1
#    veth pair, both up, lo up in peer.  rroce0/rroce1 are created only when
#    rroce.ko is loaded and RROCE_NO_LINKS is not 1.
#    The virtio NICs (scripts/vm --two-nics, the default): eth0 in init_net
#    10.78.0.1/24, eth1 moved to netns "peer2" 10.78.0.2/24 (a QEMU hub joins
#    them, so traffic between them crosses virtio-net for real).
# 4. Exports RROCE_REPO, RROCE_KO, RROCE_PROVIDER, RROCE_LOADED (1/0),
#    RROCE_GID_INDEX (RoCE v2 GID index of 10.77.0.1 on rroce0, if any).
#
# Set RROCE_TYPE=rxe to get the same setup with rdma_rxe (rxe0/rxe1).

_vm_init() {
	local repo=${RROCE_REPO:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
	export RROCE_REPO=$repo
	# shellcheck source=../selftests/lib.sh
	. "$repo/selftests/lib.sh" || return 1

	export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH
	mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug 2>/dev/null
	# the console is for the test output, dmesg is read by the tests
	dmesg -n 1 2>/dev/null

	# 2 MiB huge pages for the MAP_HUGETLB tests (rdma-core's suite): 16
	# of them (32 MiB of the guest's 2 GiB), reserved while memory is free
	echo 16 >/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages 2>/dev/null

	# Two udev rules of other packages that the host has installed (for
	# the iSER and SRP tests) start programs on every netdev and umad
	# device added or removed: open-iscsi's net-interface-handler (for an
	# iSCSI root configured by an initramfs; none here) and srp_daemon's
	# `systemctl show` (no systemd here).  Each program costs ~0.3 s on
	# the debug kernel under TCG, and the tests add and remove devices by
	# the dozen.  Masked for this boot (a same-named rule in /run wins
	# over /lib); rdma-core's device naming and systemd's sysctl rule stay.
	local m
	if [ -d /run/udev ] && command -v udevadm >/dev/null; then
		mkdir -p /run/udev/rules.d
		for m in 70-iscsi-network-interface.rules 60-srp_daemon.rules; do
			[ -e "/lib/udev/rules.d/$m" ] && ln -sf /dev/null "/run/udev/rules.d/$m"
		done
		udevadm control --reload 2>/dev/null
	fi

	# libibverbs and rdma-cm need the uverbs/ucm character devices
	for m in ib_uverbs rdma_ucm ib_umad; do
		modprobe -q "$m" 2>/dev/null
	done

	# provider visible to libibverbs
	if ! mountpoint -q /etc/libibverbs.d; then
		local d=/run/rroce/libibverbs.d
		mkdir -p "$d"
		cp -a /etc/libibverbs.d/. "$d/" 2>/dev/null
		# RROCE_PROVIDER (selftests/lib.sh; default build/lib's) names
		# the library; the .driver line is its path without the suffix.
		echo "driver ${RROCE_PROVIDER%-rdmav34.so}" >"$d/rroce.driver"
		mount --bind "$d" /etc/libibverbs.d ||
			echo "vm-init: warning: cannot bind-mount /etc/libibverbs.d" >&2
	fi
	[ -f "$RROCE_PROVIDER" ] ||
		echo "vm-init: warning: provider $RROCE_PROVIDER not built yet" >&2

	export RROCE_LOADED=0
	if [ "${RROCE_NO_INSMOD:-0}" != 1 ]; then
		if [ "$RROCE_TYPE" = rroce ] && [ ! -f "$RROCE_KO" ]; then
			echo "vm-init: warning: $RROCE_KO not built; continuing without it" >&2
		elif drv_load; then
			RROCE_LOADED=1
		else
			echo "vm-init: warning: loading $MOD failed" >&2
			dmesg | tail -5 >&2
		fi
	fi

	topo_setup || { echo "vm-init: topology setup failed" >&2; return 1; }
	if [ "${RROCE_VM_NICS:-1}" = 1 ]; then
		nics_setup || echo "vm-init: warning: eth0/eth1 setup failed" >&2
	fi

	if [ "$RROCE_LOADED" = 1 ] && [ "${RROCE_NO_LINKS:-0}" != 1 ]; then
		links_add || echo "vm-init: warning: rdma link add failed" >&2
		wait_for 10 port_active "$DEV0"
		RROCE_GID_INDEX=$(gid_index_v4 "$DEV0")
		export RROCE_GID_INDEX
	fi
	return 0
}
_vm_init
