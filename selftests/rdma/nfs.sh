#!/usr/bin/env bash
# NFS over RDMA across the standard topology: the kernel NFS server (nfsd,
# its RDMA listener svcrdma on port 20049) runs in netns peer on rroce1, the
# kernel NFS client (xprtrdma) mounts it from init_net over rroce0 with
# proto=rdma.  NFSv4.2 only, which needs no rpcbind; the server's grace
# period is cut to 10 s so that the first OPEN does not wait 90 s.
#
# The server has a mount namespace of its own (what `ip netns exec` makes):
# the nfsd filesystem (per network namespace), a tmpfs exported as the NFSv4
# root, and a tmpfs on /var/lib/nfs (the host's root filesystem is shared
# with the VM).  rpc.mountd keeps that mount namespace alive; nsenter into
# it reads the server's copy of the files.
#
# Subtests: the server starts and listens on RDMA; the mount uses the rdma
# transport; a 16 MiB file written with dd (fsync) is byte for byte the
# file on the server; read back with O_DIRECT it matches again; a directory
# of 64 small files shows the same names and contents on the server;
# xprtrdma moved the bulk data with RDMA (read chunks for the WRITEs,
# write chunks for the READs, FRWR registrations), no completion or ICRC
# errors on either device; unmount and server stop; dmesg.
. "$(dirname "$0")/../lib.sh"
test_init 8

NPORT=20049
EXP=/tmp/rroce-nfs-export
MNT=/tmp/rroce-nfs-mnt
OUT=$RROCE_REPO/build/selftests/nfs
mkdir -p "$OUT"
# generous: under a loaded host the mount alone (RDMA connect, EXCHANGE_ID,
# the grace period) took over 60 s in a niced VM
tmo=$((240 * ${RROCE_TIMEOUT_SCALE:-1}))

why=
[ "$RROCE_TYPE" = rxe ] && why="rxe (6.12) has no network namespace support: nfsd in netns peer needs it"
[ -n "$why" ] || why=$(ulp_why nfsd nfsv4 rpcrdma -- rpc.nfsd rpc.mountd exportfs mount.nfs4 nsenter)

mpid= mounted=0

# srv CMD...: run CMD in the server's network and mount namespaces.
srv() { nsenter -t "$mpid" -m -n "$@"; }

start_server() {
	local m
	for m in nfsd nfsv4 rpcrdma; do
		modprobe "$m" || { t_fail "modprobe $m"; return 1; }
	done
	mkdir -p "$EXP" "$MNT"
	# One shell in netns peer sets up its mount namespace and starts
	# mountd (a daemon: it stays, and with it the namespace) and nfsd.
	ns "$NS1" bash -c '
		set -e
		mount -t nfsd nfsd /proc/fs/nfsd
		mount -t tmpfs -o size=96m rroce-nfs "$1"
		mount -t tmpfs rroce-nfs-state /var/lib/nfs
		mkdir -p /var/lib/nfs/v4recovery /var/lib/nfs/rpc_pipefs
		: >/var/lib/nfs/etab; : >/var/lib/nfs/rmtab
		echo 10 >/proc/fs/nfsd/nfsv4leasetime
		echo 10 >/proc/fs/nfsd/nfsv4gracetime
		exportfs -o rw,sync,no_root_squash,insecure,no_subtree_check,fsid=0 "$2/24:$1"
		rpc.mountd -N 2 -N 3 -p 20048
		rpc.nfsd -N 3 -V 4.2 -U --rdma="$3" 4
	' _ "$EXP" "${IP1%.*}.0" "$NPORT" >"$OUT/server.log" 2>&1 ||
		{ t_fail "server setup in $NS1: $(tail -3 "$OUT/server.log" | tr '\n' ' ')"; return 1; }
	mpid=$(pgrep -x rpc.mountd | head -1)
	[ -n "$mpid" ] || { t_fail "rpc.mountd is not running: $(tail -3 "$OUT/server.log" | tr '\n' ' ')"; return 1; }
	diag "nfsd threads $(srv cat /proc/fs/nfsd/threads), versions '$(srv cat /proc/fs/nfsd/versions)', listeners: $(srv cat /proc/fs/nfsd/portlist | tr '\n' ' ')"
	srv grep -qx "rdma $NPORT" /proc/fs/nfsd/portlist || { t_fail "no RDMA listener on $NPORT in $NS1"; return 1; }
}

stop_server() {
	[ "$mounted" = 1 ] && umount -f "$MNT" 2>/dev/null
	mounted=0
	if [ -n "$mpid" ] && kill -0 "$mpid" 2>/dev/null; then
		srv rpc.nfsd 0
		srv exportfs -ua
		kill "$mpid"
		wait_for 10 not kill -0 "$mpid"
	fi
	mpid=
	modprobe -r nfsv4 nfsd rpcrdma 2>/dev/null
	return 0
}
trap stop_server EXIT

t_begin "nfsd in netns $NS1 ($DEV1, $IP1): NFSv4.2 with an RDMA listener on $NPORT, tmpfs exported"
if [ -n "$why" ]; then t_skip "$why"; else start_server; t_end; fi
[ "$_t_err" = 0 ] || why=${why:-server did not start}

t_begin "mount -t nfs4 -o proto=rdma,port=$NPORT,vers=4.2 $IP1:/ from init_net ($DEV0): the transport is rdma"
if [ -n "$why" ]; then
	t_skip "$why"
else
	t0=$EPOCHSECONDS
	timeout "$tmo" mount -t nfs4 -o "proto=rdma,port=$NPORT,vers=4.2" "$IP1:/" "$MNT" 2>"$OUT/mount.err"
	rc=$?
	diag "mount took $((EPOCHSECONDS - t0)) s"
	if [ "$rc" != 0 ]; then
		t_fail "mount failed (exit $rc$([ "$rc" = 124 ] && echo ", timed out after ${tmo}s")): $(tr '\n' ' ' <"$OUT/mount.err") $(dmesg | grep -iE 'rpcrdma|nfs' | tail -3 | tr '\n' ' ')"
	else
		mounted=1
		opts=$(awk -v m="$MNT" '$2 == m { print $4 }' /proc/mounts)
		diag "mounted: $opts"
		grep -q "proto=rdma" <<<"$opts" || t_fail "mount options say no proto=rdma: $opts"
		grep -A20 "mounted on $MNT " /proc/self/mountstats | grep -q $'xprt:\trdma' ||
			t_fail "/proc/self/mountstats shows no rdma transport for $MNT"
	fi
	t_end
fi
[ "$mounted" = 1 ] || why=${why:-not mounted}

# xprt_stats: the xprtrdma line of $MNT in /proc/self/mountstats (fields
# after "xprt: rdma": see xprt_rdma_print_stats()).
xprt_stats() { grep -A40 "mounted on $MNT " /proc/self/mountstats | grep -m1 $'xprt:\trdma'; }
# (counters from here: an earlier test's teardown on these devices flushed
# receive queues, completions in error that are no fault of this one)
[ -z "$why" ] && { tx0=$(cat "$(hwc_dir "$DEV0")/tx_packets") rx0=$(cat "$(hwc_dir "$DEV0")/rx_packets"); devs_mark "$DEV0" "$DEV1"; }

fs_checks NFS "$MNT" "$EXP" srv

t_begin "xprtrdma moved the data with RDMA READ and WRITE (read and write chunks, FRWR); rroce counters clean"
if [ -n "$why" ]; then
	t_skip "$why"
else
	# shellcheck disable=SC2046  # the line's fields
	set -- $(xprt_stats)
	diag "xprt rdma: sends ${8:-?} recvs ${9:-?} read_chunks ${13:-?} write_chunks ${14:-?} reply_chunks ${15:-?} rdma_request ${16:-?} B rdma_reply ${17:-?} B bad_reply ${22:-?} mrs_allocated ${26:-?}"
	[ "${13:-0}" -gt 0 ] || t_fail "no read chunks: the WRITE data did not go by RDMA READ"
	[ "${14:-0}" -gt 0 ] || t_fail "no write chunks: the READ data did not come by RDMA WRITE"
	[ "${16:-0}" -ge $((FS_MB << 20)) ] || t_fail "total_rdma_request ${16:-0} B < the $FS_MB MiB written"
	[ "${17:-0}" -ge $((FS_MB << 20)) ] || t_fail "total_rdma_reply ${17:-0} B < the $FS_MB MiB read"
	[ "${22:-1}" = 0 ] || t_fail "bad_reply_count ${22:-?}"
	tx=$(($(cat "$(hwc_dir "$DEV0")/tx_packets") - tx0)) rx=$(($(cat "$(hwc_dir "$DEV0")/rx_packets") - rx0))
	diag "$DEV0: tx_packets +$tx, rx_packets +$rx; dropped by the stack before rroce saw them: backlog (softnet_stat, all CPUs) $(softnet_drops), $IF0 rx $(cat /sys/class/net/$IF0/statistics/rx_dropped) tx $(cat /sys/class/net/$IF0/statistics/tx_dropped), $IF1 rx $(ns "$NS1" cat /sys/class/net/$IF1/statistics/rx_dropped) tx $(ns "$NS1" cat /sys/class/net/$IF1/statistics/tx_dropped)"
	[ $((tx + rx)) -ge $((2 * (FS_MB << 20) / 4096)) ] || t_fail "$DEV0 moved only $((tx + rx)) packets for $((2 * FS_MB)) MiB"
	devs_clean "$DEV0" "$DEV1"
	t_end
fi

t_begin "umount, stop nfsd and mountd, unload the modules"
if [ -z "$mpid" ] && [ "$mounted" = 0 ]; then
	t_skip "${why:-nothing to stop}"
else
	if [ "$mounted" = 1 ]; then
		timeout "$tmo" umount "$MNT" || t_fail "umount $MNT failed"
		mountpoint -q "$MNT" && t_fail "$MNT still mounted"
		mounted=0
	fi
	[ -n "$mpid" ] && { srv rpc.nfsd 0 || t_fail "rpc.nfsd 0 failed"; }
	[ -n "$mpid" ] && [ "$(srv cat /proc/fs/nfsd/threads)" != 0 ] && t_fail "nfsd threads left: $(srv cat /proc/fs/nfsd/threads)"
	stop_server
	t_end
fi
trap - EXIT

test_done
