#!/usr/bin/env bash
# SMB Direct (SMB3 over RDMA): the kernel SMB server (ksmbd, configured and
# fed by ksmbd-tools' ksmbd.mountd) shares a tmpfs; the kernel SMB client
# (cifs) mounts it with -o rdma, and files written and read through the
# mount must be the server's bytes.  SMB Direct moves file data with RDMA
# READ/WRITE into memory the client registers (FRWR) once an I/O is larger
# than the client's rdma_readwrite_threshold.
#
# ksmbd's RDMA listener and the cifs client's smbdirect create their
# rdma_cm ids in init_net only, so this runs on lib.sh's veth pair in
# init_net (vl_up): client on $VL_DEVA, server on $VL_DEVB.  On an RDMA
# device of InfiniBand node type, ksmbd listens on port 445 (5445 is
# iWARP's); the client tries 5445, then 445.
#
# Subtests: server (ksmbd.mountd with a share and a user, the RDMA listener
# in rdma_cm's table); mount -o rdma: the session's transport is SMB
# Direct; a 16 MiB dd (fsync) is the server's bytes; O_DIRECT read back
# matches; 64 small files the same on the server; the traffic crossed the
# veth on rroce with no completion or ICRC errors; umount, server shutdown,
# modules unloaded; dmesg.
. "$(dirname "$0")/../lib.sh"
test_init 8

DIR=/tmp/rroce-smb
EXP=$DIR/share
MNT=/tmp/rroce-smb-mnt
CONF=$DIR/ksmbd.conf
PWDDB=$DIR/ksmbdpwd.db
SUSER=rroce SPASS=rroce-selftest
OUT=$RROCE_REPO/build/selftests/smbdirect
mkdir -p "$OUT"
tmo=$((120 * ${RROCE_TIMEOUT_SCALE:-1}))

why=
[ "$RROCE_TYPE" = rxe ] && why="rxe: the veth pair's devices in init_net are set up for rroce only; not run"
[ -n "$why" ] || why=$(ulp_why ksmbd cifs -- ksmbd.mountd ksmbd.adduser ksmbd.control mount.cifs)

srv_up=0 mounted=0 dirmnt=0

# smbd_listening: ksmbd's RDMA listener is in rdma_cm's table
smbd_listening() { rdma resource show cm_id 2>/dev/null | grep -qE "state LISTEN .*src-addr [^ ]*:445( |$)"; }

start_server() {
	modprobe ksmbd && modprobe cifs || { t_fail "modprobe ksmbd cifs"; return 1; }
	vl_up || return 1
	mkdir -p "$DIR" "$MNT" && mount -t tmpfs -o size=96m rroce-smb "$DIR" || { t_fail "tmpfs on $DIR"; return 1; }
	dirmnt=1
	mkdir -p "$EXP"
	cat >"$CONF" <<-EOF
	[global]
		netbios name = RROCE
		bind interfaces only = yes
		interfaces = $VL_B
	[rroce]
		path = $EXP
		read only = no
		force user = root
		force group = root
	EOF
	ksmbd.adduser -c "$CONF" -i "$PWDDB" -a "$SUSER" -p "$SPASS" >"$OUT/adduser.log" 2>&1 ||
		{ t_fail "ksmbd.adduser: $(tail -2 "$OUT/adduser.log" | tr '\n' ' ')"; return 1; }
	ksmbd.mountd -c "$CONF" -u "$PWDDB" >"$OUT/mountd.log" 2>&1 ||
		{ t_fail "ksmbd.mountd: $(tail -2 "$OUT/mountd.log" | tr '\n' ' ')"; return 1; }
	srv_up=1
	wait_for "$tmo" smbd_listening || { t_fail "no RDMA listener on port 445: $(rdma resource show cm_id | tr '\n' ' ')"; return 1; }
	diag "rdma_cm: $(rdma resource show cm_id | grep LISTEN | tr -s ' ' | tr '\n' ' ')"
}

stop_server() {
	[ "$mounted" = 1 ] && bounded 30 umount -f "$MNT" 2>/dev/null
	mounted=0
	if [ "$srv_up" = 1 ]; then
		# (stops the listeners and waits for every connection to go)
		bounded "$tmo" sh -c 'ksmbd.control -s >"$1" 2>&1' _ "$OUT/control.log" ||
			t_fail "ksmbd.control -s: exit $? $(tr '\n' ' ' <"$OUT/control.log")"
		wait_for 10 not pgrep -x ksmbd.mountd
		srv_up=0
	fi
	[ "$dirmnt" = 1 ] && umount "$DIR" && dirmnt=0
	# (bounded: removing a device waits for every ULP using it; vl_down
	# runs in the bounded subshell, so it is the last call of it here)
	bounded "$tmo" vl_down
	bounded 30 modprobe -r cifs 2>/dev/null
	bounded 30 modprobe -r ksmbd 2>/dev/null
	return 0
}
trap stop_server EXIT

t_begin "ksmbd on $VL_DEVB (veth $VL_A/$VL_B in init_net): share 'rroce' on a tmpfs, a user, the SMB Direct listener on port 445"
if [ -n "$why" ]; then t_skip "$why"; else start_server; t_end; fi
[ "$_t_err" = 0 ] || why=${why:-server did not start}

t_begin "mount -t cifs -o rdma,vers=3.1.1 //$VL_IPB/rroce from $VL_DEVA: the session runs over SMB Direct"
if [ -n "$why" ]; then
	t_skip "$why"
else
	t0=$EPOCHSECONDS
	timeout "$tmo" mount -t cifs "//$VL_IPB/rroce" "$MNT" -o "rdma,vers=3.1.1,username=$SUSER,password=$SPASS" 2>"$OUT/mount.err"
	rc=$?
	diag "mount took $((EPOCHSECONDS - t0)) s"
	if [ "$rc" != 0 ]; then
		t_fail "mount failed (exit $rc$([ "$rc" = 124 ] && echo ", timed out after ${tmo}s")): $(tr '\n' ' ' <"$OUT/mount.err") $(dmesg | grep -iE 'cifs|smb|ksmbd' | tail -3 | tr '\n' ' ')"
	else
		mounted=1
		opts=$(awk -v m="$MNT" '$2 == m { print $4 }' /proc/mounts)
		diag "mounted: $opts"
		grep -qw rdma <<<"$opts" || t_fail "mount options say no rdma: $opts"
		grep -A3 "SMBDirect" /proc/fs/cifs/DebugData >"$OUT/debugdata" 2>/dev/null
		diag "cifs: $(head -2 "$OUT/debugdata" | tr '\n' ' ')"
		grep -q "SMBDirect (in hex) protocol version: 100" "$OUT/debugdata" ||
			t_fail "/proc/fs/cifs/DebugData shows no SMB Direct connection: $(grep -m2 -iE 'smbdirect|rdma' /proc/fs/cifs/DebugData | tr '\n' ' ')"
	fi
	t_end
fi
[ "$mounted" = 1 ] || why=${why:-not mounted}

[ -z "$why" ] && { vl_mark; devs_mark "$VL_DEVA" "$VL_DEVB"; }
fs_checks SMB "$MNT" "$EXP"

t_begin "the data crossed the veth on rroce ($VL_A counters cover it), no completion or ICRC errors"
if [ -n "$why" ]; then
	t_skip "$why"
else
	vl_covers $((2 * (FS_MB << 20)))
	grep -E "MR|receive_credit" /proc/fs/cifs/DebugData | while read -r l; do diag "cifs: $l"; done
	devs_clean "$VL_DEVA" "$VL_DEVB"
	t_end
fi

t_begin "umount, ksmbd shut down, modules unloaded"
if [ "$srv_up" = 0 ] && [ "$mounted" = 0 ]; then
	stop_server
	t_skip "${why:-nothing to stop}"
else
	if [ "$mounted" = 1 ]; then
		t0=$EPOCHSECONDS
		bounded "$tmo" umount "$MNT" || t_fail "umount $MNT failed"
		diag "umount took $((EPOCHSECONDS - t0)) s"
		mountpoint -q "$MNT" && t_fail "$MNT still mounted"
		mounted=0
	fi
	stop_server
	pgrep -x ksmbd.mountd >/dev/null && t_fail "ksmbd.mountd still running"
	[ -d /sys/module/ksmbd ] && t_fail "ksmbd still loaded"
	ibdev_exists "$VL_DEVA" && t_fail "$VL_DEVA still there"
	t_end
fi
trap - EXIT

test_done
