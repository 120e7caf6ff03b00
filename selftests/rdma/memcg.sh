#!/usr/bin/env bash
# Kernel memory of user queues is charged to the creator (py/memcg_hog.py
# creates maximum-size QPs until a creation fails):
#   - an unprivileged process (nobody, no capabilities) in a memory cgroup
#     with memory.max 32 MiB: creation fails with ENOMEM at the limit (no
#     OOM kill), the cgroup's memory.current stays within memory.max, the
#     machine's MemAvailable drops by less than twice the limit; all of it
#     comes back when the process exits
#   - the per-context limit (module parameter max_ctx_ring_mb, lowered to
#     16 MiB) in the root cgroup: ENOMEM after a few QPs
#   - rdma resource shows no QP left afterwards
# Before the fix nothing was charged: the hog stopped on its own memory
# guard (MemAvailable dropped by 256 MiB) with no error.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
. "$(dirname "$0")/../lib.sh"

test_init 4

why=$(provider_unavailable)
[ "$RROCE_TYPE" = rroce ] || why=${why:-"max_ctx_ring_mb is an rroce module parameter"}
if [ -z "$why" ]; then
	cg=/sys/fs/cgroup
	if [ "$(stat -fc %T $cg 2>/dev/null)" != cgroup2fs ]; then
		mkdir -p $cg && mount -t cgroup2 none $cg 2>/dev/null || why="cannot mount cgroup2"
	fi
fi
if [ -z "$why" ]; then
	grep -qw memory $cg/cgroup.controllers || why="no memory controller (CONFIG_MEMCG)"
fi
if [ -n "$why" ]; then
	ktap_skip "memcg limit" "$why"
	ktap_skip "per-context limit" "$why"
	ktap_skip "nothing left behind" "$why"
	test_done
fi
G0=$(gid_index "$DEV0" "$(gid_v4 "$IP0")")
HOG="$RROCE_REPO/selftests/py/memcg_hog.py"
TMO=$((300 * ${RROCE_TIMEOUT_SCALE:-1}))
field() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2"; }
kb_avail() { awk '/^MemAvailable:/ {print $2}' /proc/meminfo; }
kb_vmalloc() { awk '/^VmallocUsed:/ {print $2}' /proc/meminfo; }

LIMIT_MB=32
t_begin "nobody in a memory cgroup of ${LIMIT_MB} MiB: QP creation fails with ENOMEM at the limit, the machine untouched"
echo +memory >$cg/cgroup.subtree_control 2>/dev/null
grp=$cg/rroce_memcg_$$
mkdir $grp
echo $((LIMIT_MB << 20)) >$grp/memory.max
echo 0 >$grp/memory.swap.max 2>/dev/null
modes=$(stat -c '%a %n' /dev/infiniband/uverbs*)
chmod 0666 /dev/infiniband/uverbs*
v0=$(kb_vmalloc)
out=$(timeout "$TMO" bash -c 'echo $$ >"$1/cgroup.procs" && shift && exec setpriv --reuid nobody --regid nogroup \
	--clear-groups --inh-caps=-all --bounding-set=-all /usr/bin/python3 "$@"' _ "$grp" "$HOG" "$DEV0" "$G0" 64 262144 2>&1)
rc=$?
peak=$(cat $grp/memory.peak 2>/dev/null || cat $grp/memory.max_usage_in_bytes 2>/dev/null || echo 0)
oom=$(awk '$1 == "oom_kill" {print $2}' $grp/memory.events)
diag "hog (exit $rc): $out"
diag "memory.peak $((peak >> 10)) KiB, memory.events oom_kill ${oom:-?}"
[ $rc = 0 ] || t_fail "the process exited $rc (killed?)"
expect_eq "failure errno" "$(field errname "$out")" ENOMEM
[ "$(field qps "$out")" -ge 1 ] 2>/dev/null || t_fail "not even one QP fitted"
[ "${oom:-0}" = 0 ] || t_fail "the memcg OOM killer ran ($oom)"
[ "$peak" -le $((LIMIT_MB << 20)) ] || t_fail "memory.peak $peak above memory.max"
dropped=$(field dropped_kb "$out")
[ "${dropped:-999999}" -lt $((2 * LIMIT_MB * 1024)) ] ||
	t_fail "MemAvailable dropped by ${dropped} KiB (limit ${LIMIT_MB} MiB): the kernel memory was not charged"
# What the queues took is back.  The page cache of the files the process
# read (Python and its modules, the first time in this boot: up to ~10 MiB)
# stays charged to the group, so that part (memory.stat "file") is not
# counted; the rest is bounded loosely.
vm=$(awk '$1 == "vmalloc" {print $2}' $grp/memory.stat)
file=$(awk '$1 == "file" {print $2}' $grp/memory.stat)
cur=$(cat $grp/memory.current)
diag "after the exit: memory.current $((cur >> 10)) KiB (page cache $((${file:-0} >> 10)) KiB), vmalloc $((${vm:-0} >> 10)) KiB"
[ "${vm:-0}" = 0 ] || t_fail "memory.stat vmalloc is $vm after the process exited"
[ $((cur - ${file:-0})) -lt $((LIMIT_MB << 18)) ] ||
	t_fail "memory.current $cur (page cache ${file:-0}) after the process exited"
rmdir $grp
t_end

t_begin "per-context limit max_ctx_ring_mb=16 (root cgroup): ENOMEM after a few QPs, back to the default"
par=/sys/module/rroce/parameters/max_ctx_ring_mb
old=$(cat $par)
echo 16 >$par
out=$(timeout "$TMO" /usr/bin/python3 "$HOG" "$DEV0" "$G0" 64 262144 2>&1)
rc=$?
echo "$old" >$par
diag "hog (exit $rc): $out"
[ $rc = 0 ] || t_fail "exited $rc"
expect_eq "failure errno" "$(field errname "$out")" ENOMEM
n=$(field qps "$out")
[ "${n:-0}" -ge 1 ] && [ "$n" -lt 64 ] || t_fail "$n QPs fitted under 16 MiB of rings"
t_end
while read -r m nm; do chmod "$m" "$nm"; done <<<"$modes"

t_begin "no QP left behind (rdma resource), vmalloc'ed memory back (VmallocUsed)"
sleep 1
qps=$(rdma resource show qp 2>/dev/null | grep -c "$DEV0.*RC" || true)
expect_eq "RC QPs of $DEV0" "$qps" 0
# (MemAvailable moves with the page cache; the queues' memory is vmalloc'ed:
# both hogs together took some 80 MiB of it.)
v1=$(kb_vmalloc)
diag "VmallocUsed $v0 KiB before, $v1 KiB after"
[ $((v1 - v0)) -lt 4096 ] || t_fail "VmallocUsed is $(((v1 - v0) >> 10)) MiB above where it was"
t_end

test_done
