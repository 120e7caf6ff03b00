#!/usr/bin/env bash
# iSCSI Extensions for RDMA (iSER): LIO's iSCSI target with its RDMA
# transport (isert) exports a 64 MiB ramdisk on one rroce device; open-iscsi
# (iscsid, iscsiadm) with the kernel's iSER initiator (ib_iser) discovers
# it (a discovery session over iSER: ib_iser negotiates text itself), logs
# in over the other device, and the LUN appears as an sd disk that
# O_DIRECT dd writes and reads back byte for byte.
#
# isert and ib_iser create their rdma_cm ids in init_net only, so this runs
# on lib.sh's veth pair in init_net (vl_up): initiator on $VL_DEVA, target
# on $VL_DEVB.
#
# open-iscsi keeps its node database in /etc/iscsi: a tmpfs with a minimal
# iscsid.conf and an initiator name of our own goes over it for the test,
# so that nothing of the host's (or an earlier run's) configuration counts.
#
# Subtests: target (ramdisk, iSCSI portal with iSER on $VL_IPB:3260); iscsid
# up and SendTargets discovery through the iser interface finds the target;
# login: the session's transport is iser and LIO's disk appears; O_DIRECT
# writes+reads of 4 KiB, 64 KiB, 1 MiB and 4 MiB compared; the I/O crossed
# the veth on rroce with no completion or ICRC errors (counted from the
# login: the discovery session's teardown flushed its receive queue); logout, the disk goes
# away, target, iscsid, devices and routing removed; dmesg.
. "$(dirname "$0")/../lib.sh"
test_init 10

IQN=iqn.2026-12.org.rroce:iser-selftest
INAME=iqn.2026-12.org.rroce:initiator
PORTAL=$VL_IPB:3260
OUT=$RROCE_REPO/build/selftests/iser
mkdir -p "$OUT"
tmo=$((60 * ${RROCE_TIMEOUT_SCALE:-1}))

why=
[ "$RROCE_TYPE" = rxe ] && why="rxe: the veth pair's devices in init_net are set up for rroce only; not run"
[ -n "$why" ] || why=$(ulp_why iscsi_target_mod ib_isert ib_iser target_core_mod -- iscsid iscsiadm)

TPG=$LIO/iscsi/$IQN/tpgt_1
bs= etc=0 ipid= blk= logged_in=0

setup() {
	modprobe iscsi_target_mod && modprobe ib_isert || { t_fail "modprobe iscsi_target_mod ib_isert"; return 1; }
	vl_up || return 1
	bs=$(lio_ramdisk_add iser 64) || { t_fail "ramdisk backstore"; return 1; }
	mkdir -p "$TPG" || { t_fail "mkdir $TPG"; return 1; }
	mkdir "$TPG/lun/lun_0" && ln -s "$bs" "$TPG/lun/lun_0/iser" || { t_fail "LUN under $TPG"; return 1; }
	# no CHAP, ACLs made on login (as targetcli's demo mode)
	echo 0 >"$TPG/attrib/authentication" && echo 1 >"$TPG/attrib/generate_node_acls" &&
		echo 1 >"$TPG/attrib/cache_dynamic_acls" && echo 0 >"$TPG/attrib/demo_mode_write_protect" ||
		{ t_fail "TPG attributes"; return 1; }
	mkdir "$TPG/np/$PORTAL" && echo 1 >"$TPG/np/$PORTAL/iser" || { t_fail "portal $PORTAL with iser"; return 1; }
	echo 1 >"$TPG/enable" || { t_fail "enable $TPG"; return 1; }
	diag "target $IQN on $PORTAL ($VL_DEVB): iser $(cat "$TPG/np/$PORTAL/iser"), LUN 0 = ${bs##*/}"
}

start_iscsid() {
	mount -t tmpfs -o size=8m rroce-iscsi /etc/iscsi || { t_fail "tmpfs on /etc/iscsi"; return 1; }
	etc=1
	printf 'iscsid.startup = /bin/true\nnode.startup = manual\nnode.session.scan = auto\nnode.conn[0].timeo.login_timeout = %d\n' \
		"$tmo" >/etc/iscsi/iscsid.conf
	echo "InitiatorName=$INAME" >/etc/iscsi/initiatorname.iscsi
	modprobe ib_iser || { t_fail "modprobe ib_iser"; return 1; }
	# (a session of its own: when it stops, iscsid signals its process group)
	setsid iscsid -f >"$OUT/iscsid.log" 2>&1 &
	ipid=$!
	# ready once it listens on its (abstract) control socket
	wait_for "$tmo" grep -q ISCSIADM_ABSTRACT_NAMESPACE /proc/net/unix ||
		{ t_fail "iscsid not listening: $(tail -3 "$OUT/iscsid.log" | tr '\n' ' ')"; return 1; }
}

teardown() {
	[ "$logged_in" = 1 ] && timeout "$tmo" iscsiadm -m node -T "$IQN" -p "$PORTAL" -I iser --logout >/dev/null 2>&1
	logged_in=0
	if [ -n "$ipid" ]; then
		kill "$ipid" 2>/dev/null
		wait "$ipid" 2>/dev/null
		ipid=
	fi
	[ "$etc" = 1 ] && umount /etc/iscsi && etc=0
	if [ -d "$TPG" ]; then
		echo 0 >"$TPG/enable"
		[ -d "$TPG/np/$PORTAL" ] && { echo 0 >"$TPG/np/$PORTAL/iser"; rmdir "$TPG/np/$PORTAL"; }
		[ -L "$TPG/lun/lun_0/iser" ] && rm "$TPG/lun/lun_0/iser"
		[ -d "$TPG/lun/lun_0" ] && rmdir "$TPG/lun/lun_0"
		rmdir "$TPG" "${TPG%/*}"
	fi
	[ -d "$LIO/iscsi" ] && rmdir "$LIO/iscsi"
	lio_ramdisk_del iser
	vl_down
	modprobe -r ib_iser ib_isert iscsi_target_mod 2>/dev/null
	return 0
}
trap teardown EXIT

t_begin "target: LIO iSCSI $IQN, 64 MiB ramdisk LUN, portal $PORTAL on $VL_DEVB with iSER enabled (veth $VL_A/$VL_B in init_net)"
if [ -n "$why" ]; then t_skip "$why"; else setup; t_end; fi
[ "$_t_err" = 0 ] || why=${why:-target setup failed}

t_begin "iscsid runs; SendTargets discovery of $PORTAL through the iser interface finds $IQN"
if [ -n "$why" ]; then
	t_skip "$why"
else
	if start_iscsid; then
		if ! timeout "$tmo" iscsiadm -m discovery -t sendtargets -p "$PORTAL" -I iser >"$OUT/disc.out" 2>&1; then
			t_fail "discovery: $(tail -3 "$OUT/disc.out" | tr '\n' ' ')"
		else
			diag "discovered: $(tr '\n' ' ' <"$OUT/disc.out")"
			diag "completion errors after the discovery session: $VL_DEVA $(cat "$(hwc_dir "$VL_DEVA")/completion_errors"), $VL_DEVB $(cat "$(hwc_dir "$VL_DEVB")/completion_errors") (its receive queues flushed on teardown)"
			grep -q "^$PORTAL,1 $IQN\$" "$OUT/disc.out" || t_fail "$IQN at $PORTAL not among the discovered targets"
			iscsiadm -m node -T "$IQN" -p "$PORTAL" -I iser 2>/dev/null | grep -qx "iface.transport_name = iser" ||
				t_fail "the node record is not bound to the iser transport"
		fi
	fi
	t_end
fi
[ "$_t_err" = 0 ] || why=${why:-no discovery}

t_begin "login over iSER: the session's transport is iser, LIO's disk appears"
if [ -n "$why" ]; then
	t_skip "$why"
else
	before=$(scsi_disks)
	if ! timeout "$tmo" iscsiadm -m node -T "$IQN" -p "$PORTAL" -I iser --login >"$OUT/login.out" 2>&1; then
		t_fail "login: $(tail -3 "$OUT/login.out" | tr '\n' ' ') $(dmesg | grep -iE 'iser|isert|iscsi' | tail -3 | tr '\n' ' ')"
	else
		logged_in=1
		diag "$(tail -1 "$OUT/login.out")"
		sess=$(iscsiadm -m session 2>/dev/null)
		diag "session: $sess"
		grep -q "^iser: .* $PORTAL,1 $IQN" <<<"$sess" || t_fail "no iser session to $IQN: '$sess'"
		lio_disk_wait "$before"
	fi
	t_end
fi
[ -n "$blk" ] || why=${why:-not logged in}

[ -z "$why" ] && { vl_mark; devs_mark "$VL_DEVA" "$VL_DEVB"; }
blk_xfers "$blk"

t_begin "the I/O crossed the veth ($VL_A counters cover it) on rroce, no completion or ICRC errors"
if [ -n "$why" ]; then
	t_skip "$why"
else
	vl_covers "$BLK_XFER_TOTAL"
	devs_clean "$VL_DEVA" "$VL_DEVB"
	t_end
fi

t_begin "logout: the disk goes away; target, iscsid, devices and routing removed"
if [ "$logged_in" = 0 ]; then
	teardown
	t_skip "${why:-not logged in}"
else
	timeout "$tmo" iscsiadm -m node -T "$IQN" -p "$PORTAL" -I iser --logout >"$OUT/logout.out" 2>&1 ||
		t_fail "logout: $(tail -2 "$OUT/logout.out" | tr '\n' ' ')"
	logged_in=0
	[ -n "$blk" ] && { wait_for "$tmo" not test -b "$blk" || t_fail "$blk still there"; }
	teardown
	mountpoint -q /etc/iscsi && t_fail "/etc/iscsi still has the tmpfs"
	ibdev_exists "$VL_DEVA" && t_fail "$VL_DEVA still there"
	[ -d /sys/module/ib_isert ] && t_fail "ib_isert still loaded"
	t_end
fi
trap - EXIT

test_done
