#!/usr/bin/env bash
# SRP (SCSI RDMA Protocol) over rdma_cm across the standard topology: LIO's
# SRP target (ib_srpt) exports a 64 MiB ramdisk on rroce0 in init_net (its
# rdma_cm listener lives in init_net only); the kernel's SRP initiator
# (ib_srp) logs in from netns peer over rroce1 (ib_srp takes the network
# namespace of the process that writes add_target), and the LUN appears as
# an sd disk that O_DIRECT dd writes and reads back byte for byte.
#
# RoCE has no subnet manager, so srp_daemon's discovery does not apply: the
# login names the target by address (dest=IP:port), as srp_daemon would
# once it had found it.  The target port is rroce0's GID 0 (the name ib_srpt
# gives it); the initiator port ID is initiator_ext and rroce1's GID 0
# interface ID, which the target's ACL names (ib_srpt has no demo mode).
#
# Subtests: target (ramdisk backstore, srpt port, ACL, rdma_cm listener);
# login from netns peer and the LIO disk appears on an ib_srp host bound to
# rroce1; O_DIRECT writes+reads of 4 KiB, 64 KiB, 1 MiB and 4 MiB compared;
# the I/O went over rroce (packets on both devices, no completion or ICRC
# errors); logout, the disk goes away, target and modules removed; dmesg.
. "$(dirname "$0")/../lib.sh"
test_init 9

SPORT=5555
IEXT=4791000000000001
OUT=$RROCE_REPO/build/selftests/srp
mkdir -p "$OUT"
tmo=$((60 * ${RROCE_TIMEOUT_SCALE:-1}))

why=
[ "$RROCE_TYPE" = rxe ] && why="rxe (6.12) has no network namespace support: the initiator in netns peer needs it"
[ -n "$why" ] || why=$(ulp_why ib_srpt ib_srp target_core_mod)

SRPT=$LIO/srpt
tpg= acl= bs= host= blk=

# gid_hex DEV: GID 0 of DEV as 32 hex digits
gid_hex() { tr -d ':\n' <"$SYS_IB/$1/ports/1/gids/0"; }

setup_target() {
	local g wwn
	modprobe ib_srpt || { t_fail "modprobe ib_srpt"; return 1; }
	bs=$(lio_ramdisk_add srp 64) || { t_fail "ramdisk backstore"; return 1; }
	[ -d "$SRPT" ] || mkdir "$SRPT" || { t_fail "mkdir $SRPT"; return 1; }
	g=$(gid_hex "$DEV0")
	wwn=$SRPT/0x$g
	tpg=$wwn/tpg_1
	# the initiator port ID ib_srp sends: initiator_ext, then its GID's
	# interface ID
	acl=$tpg/acls/0x$IEXT$(gid_hex "$DEV1" | cut -c17-32)
	mkdir "$wwn" "$tpg" || { t_fail "srpt port $wwn: $(ls "$SRPT" | tr '\n' ' ')"; return 1; }
	mkdir "$tpg/lun/lun_0" && ln -s "$bs" "$tpg/lun/lun_0/srp" &&
		mkdir "$acl" "$acl/lun_0" && ln -s "$tpg/lun/lun_0" "$acl/lun_0/lun_0" ||
		{ t_fail "LUN and ACL under $tpg"; return 1; }
	echo 1 >"$tpg/enable" || { t_fail "enable $tpg"; return 1; }
	echo "$SPORT" >"$SRPT/discovery_auth/rdma_cm_port" || { t_fail "rdma_cm_port $SPORT"; return 1; }
	diag "target: $DEV0 port ${wwn##*/}, service GUID $(cat /sys/module/ib_srpt/parameters/srpt_service_guid), ACL ${acl##*/}, rdma_cm port $(cat "$SRPT/discovery_auth/rdma_cm_port")"
}

teardown() {
	local p
	for p in /sys/class/srp_remote_ports/port-*; do
		[ -e "$p/delete" ] && echo 1 >"$p/delete"
	done
	[ -d "$SRPT" ] && echo 0 >"$SRPT/discovery_auth/rdma_cm_port"
	if [ -n "$tpg" ] && [ -d "$tpg" ]; then
		echo 0 >"$tpg/enable"
		[ -L "$acl/lun_0/lun_0" ] && rm "$acl/lun_0/lun_0"
		[ -d "$acl/lun_0" ] && rmdir "$acl/lun_0"
		[ -d "$acl" ] && rmdir "$acl"
		[ -L "$tpg/lun/lun_0/srp" ] && rm "$tpg/lun/lun_0/srp"
		[ -d "$tpg/lun/lun_0" ] && rmdir "$tpg/lun/lun_0"
		rmdir "$tpg" "${tpg%/*}"
	fi
	tpg=
	[ -d "$SRPT" ] && rmdir "$SRPT"
	lio_ramdisk_del srp
	modprobe -r ib_srp ib_srpt 2>/dev/null
	return 0
}
trap teardown EXIT

t_begin "target: ib_srpt on $DEV0 (init_net), 64 MiB ramdisk LUN, ACL for $DEV1's port ID, rdma_cm listener on $SPORT"
if [ -n "$why" ]; then t_skip "$why"; else setup_target; t_end; fi
[ "$_t_err" = 0 ] || why=${why:-target setup failed}

t_begin "ib_srp logs in from netns $NS1 over $DEV1 (dest=$IP0:$SPORT): LIO's disk appears on an ib_srp host bound to $DEV1"
if [ -n "$why" ]; then
	t_skip "$why"
else
	before=$(scsi_disks)
	guid=$(sed 's/^0x//' /sys/module/ib_srpt/parameters/srpt_service_guid)
	modprobe ib_srp
	opts="id_ext=$guid,ioc_guid=$guid,dest=$IP0:$SPORT,initiator_ext=$IEXT"
	if ! timeout "$tmo" ip netns exec "$NS1" sh -c 'echo "$1" >"$2"' _ "$opts" "/sys/class/infiniband_srp/srp-$DEV1-1/add_target" 2>"$OUT/add.err"; then
		t_fail "add_target '$opts': $(tr '\n' ' ' <"$OUT/add.err") $(dmesg | grep -iE 'srp' | tail -3 | tr '\n' ' ')"
	elif lio_disk_wait "$before"; then
		for h in /sys/class/scsi_host/host*; do
			[ "$(cat "$h/proc_name" 2>/dev/null)" = ib_srp ] && host=$h
		done
		if [ -z "$host" ]; then
			t_fail "no ib_srp SCSI host"
		else
			diag "${host##*/}: local_ib_device $(cat "$host/local_ib_device"), sgid $(cat "$host/sgid"), req_lim $(cat "$host/req_lim"), ch_count $(cat "$host/ch_count")"
			[ "$(cat "$host/local_ib_device")" = "$DEV1" ] || t_fail "ib_srp host on $(cat "$host/local_ib_device"), not $DEV1"
		fi
	fi
	t_end
fi
[ -n "$blk" ] || why=${why:-not logged in}

[ -z "$why" ] && { tx0=$(cat "$(hwc_dir "$DEV1")/tx_packets") rx0=$(cat "$(hwc_dir "$DEV1")/rx_packets"); devs_mark "$DEV0" "$DEV1"; }
blk_xfers "$blk"

t_begin "the I/O went over rroce ($DEV1 packets cover it), no completion or ICRC errors"
if [ -n "$why" ]; then
	t_skip "$why"
else
	tx=$(($(cat "$(hwc_dir "$DEV1")/tx_packets") - tx0)) rx=$(($(cat "$(hwc_dir "$DEV1")/rx_packets") - rx0))
	diag "$DEV1: tx_packets +$tx, rx_packets +$rx for $BLK_XFER_TOTAL B written and read"
	# at most 4 KiB of payload a packet (the port's MTU is smaller)
	[ $((tx + rx)) -ge $((BLK_XFER_TOTAL / 4096)) ] || t_fail "only $((tx + rx)) packets for $BLK_XFER_TOTAL B"
	devs_clean "$DEV0" "$DEV1"
	t_end
fi

t_begin "log out (delete the SRP remote port): the disk goes away; target and modules removed"
if [ -z "$blk" ]; then
	teardown
	t_skip "${why:-not logged in}"
else
	for p in /sys/class/srp_remote_ports/port-*; do
		echo 1 >"$p/delete" || t_fail "delete $p"
	done
	wait_for "$tmo" not test -b "$blk" || t_fail "$blk still there"
	teardown
	[ -d /sys/module/ib_srpt ] && t_fail "ib_srpt still loaded"
	[ -d "$LIO/core/rd_mcp_0" ] && t_fail "backstore still there"
	t_end
fi
trap - EXIT

test_done
