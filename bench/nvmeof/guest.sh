#!/usr/bin/env bash
# Runs in each guest of scripts/vm-pair (under scripts/vm-pair-guest): NVMe
# over Fabrics (RDMA) between the two VMs.  Guest b is the target (nvmet,
# nvmet-rdma, a 64 MiB memory-backed null_blk namespace), guest a the host
# (nvme-rdma, which registers every data buffer with IB_WR_REG_MR chained
# before its command SEND), both on one RDMA device on the link NIC pair0:
# rroce (scripts/vm's RROCE_KO) or, with RROCE_TYPE=rxe, rdma_rxe.  The
# host runs fio (libaio, O_DIRECT, 4 KiB by default) for each pattern and
# queue depth and prints one line per run:
#   NVMEOF <rw> qd <depth> iops <iops> clat_us <mean completion latency>
# Settings (the environment scripts/vm passes on): RROCE_NV_SECS (10),
# RROCE_NV_QDS ("1 16"), RROCE_NV_RWS ("randread randwrite"), RROCE_NV_BS
# (4k).  Exits non-zero if a step fails; a run without a figure prints
# "NVMEOF ... failed".
set -u
role=${RROCE_PAIR_ROLE:?run me through scripts/vm-pair}
dir=${RROCE_PAIR_DIR:?}
nqn=nqn.2026-12.org.rroce:bench-nvmeof
cfg=/sys/kernel/config
dev=rroce_nv  # (rroce takes names beginning with "rroce")
modprobe configfs
mountpoint -q $cfg || mount -t configfs none $cfg || exit 1
rdma link add $dev type "${RROCE_TYPE:-rroce}" netdev "${RROCE_PAIR_IF:-pair0}" || exit 1
for _ in $(seq 50); do
	grep -q ACTIVE "/sys/class/infiniband/$dev/ports/1/state" 2>/dev/null && break
	sleep 0.2
done

if [ "$role" = b ]; then
	modprobe nvmet && modprobe nvmet_rdma && modprobe null_blk nr_devices=0 || exit 1
	before=$(ls /sys/block)
	nb=$cfg/nullb/bench
	mkdir $nb && echo 1 >$nb/memory_backed && echo 64 >$nb/size &&
		echo 4096 >$nb/blocksize && echo 1 >$nb/power || exit 1
	bdev=
	for _ in $(seq 50); do
		bdev=$(comm -13 <(printf '%s\n' "$before") <(ls /sys/block) | head -1)
		[ -n "$bdev" ] && [ -b "/dev/$bdev" ] && break
		sleep 0.2
	done
	[ -n "$bdev" ] || { echo "no null_blk device" >&2; exit 1; }
	s=$cfg/nvmet/subsystems/$nqn p=$cfg/nvmet/ports/1
	mkdir $s && echo 1 >$s/attr_allow_any_host && mkdir $s/namespaces/1 &&
		echo -n "/dev/$bdev" >$s/namespaces/1/device_path && echo 1 >$s/namespaces/1/enable &&
		mkdir $p && echo rdma >$p/addr_trtype && echo ipv4 >$p/addr_adrfam &&
		echo "$RROCE_PAIR_IP" >$p/addr_traddr && echo 4420 >$p/addr_trsvcid &&
		ln -s $s $p/subsystems/$nqn || exit 1
	: >"$dir/target-ready"
	# until the host is done (or gives up)
	for _ in $(seq 1800); do [ -e "$dir/host-done" ] && break; sleep 1; done
	rm $p/subsystems/$nqn; rmdir $p
	echo 0 >$s/namespaces/1/enable; rmdir $s/namespaces/1 $s
	echo 0 >$nb/power; rmdir $nb
	exit 0
fi

trap ': >"$dir/host-done"' EXIT
modprobe nvme_rdma && modprobe nvme_fabrics || exit 1
for _ in $(seq 300); do [ -e "$dir/target-ready" ] && break; sleep 1; done
[ -e "$dir/target-ready" ] || { echo "the target did not come up" >&2; exit 1; }
before=$(ls /sys/block)
exec 7<>/dev/nvme-fabrics &&
	echo "transport=rdma,traddr=$RROCE_PAIR_PEER_IP,trsvcid=4420,nqn=$nqn,host_traddr=$RROCE_PAIR_IP" >&7 &&
	read -r -t 60 reply <&7
exec 7>&-
ctrl=nvme$(sed -n 's/.*instance=\([0-9]*\).*/\1/p' <<<"${reply:-}")
[ "$ctrl" != nvme ] || { echo "connect failed: ${reply:-}" >&2; exit 1; }
blk=
for _ in $(seq 100); do
	blk=$(comm -13 <(printf '%s\n' "$before") <(ls /sys/block) | grep '^nvme' | head -1)
	[ -n "$blk" ] && [ -b "/dev/$blk" ] && break
	sleep 0.2
done
[ -n "$blk" ] || { echo "no namespace appeared" >&2; exit 1; }
rc=0
for rw in ${RROCE_NV_RWS:-randread randwrite}; do
	for qd in ${RROCE_NV_QDS:-1 16}; do
		out=$(fio --name=nv --filename="/dev/$blk" --direct=1 --ioengine=libaio --rw="$rw" \
			--bs="${RROCE_NV_BS:-4k}" --iodepth="$qd" --runtime="${RROCE_NV_SECS:-10}" \
			--time_based --size=32M --output-format=terse --terse-version=3 2>&1)
		# terse v3: read iops field 8, clat mean 16 (us); write 49, 57
		line=$(awk -F';' -v rw="$rw" 'NF > 60 {
			i = (rw ~ /read/) ? 8 : 49; c = (rw ~ /read/) ? 16 : 57
			printf "%d %.1f", $i, $c }' <<<"$out")
		if [ -n "$line" ] && [ "${line%% *}" -gt 0 ]; then
			echo "NVMEOF $rw qd $qd iops ${line%% *} clat_us ${line#* }"
		else
			echo "NVMEOF $rw qd $qd failed: $(tail -2 <<<"$out" | tr '\n' ' ')"
			rc=1
		fi
	done
done
echo 1 >"/sys/class/nvme/$ctrl/delete_controller"
exit $rc
