#!/usr/bin/env bash
# Device limits and RLIMIT_MEMLOCK, with selftests/c/hostile_user.c:
#   - rroce is reloaded with max_objects=64 (module parameter: caps the
#     advertised and enforced max_pd/max_cq/max_qp/max_srq/max_mr/max_ah
#     so that they can be exhausted in a test); ibv_devinfo shows the caps
#   - "limits" on $DEV0: PDs, CQs, QPs, SRQs, MRs, AHs created until the
#     device refuses: exactly max minus what is in use (rdma resource) fits,
#     the next one fails with ENOMEM, and after freeing them all the same
#     number fits again; QP/CQ/SRQ sizes at max_qp_wr, max_sge, max_cqe,
#     max_srq_wr, max_srq_sge work and one more is EINVAL; a zero-length or
#     unmapped 1 TiB MR is refused; then a fresh QP pair moves data intact
#   - "memlock" as nobody without capabilities (setpriv, uverbs nodes made
#     0666 meanwhile) under ulimit -l 1024: MRs up to 1 MiB register, one
#     more page and a single MR above the limit fail with ENOMEM, a freed
#     MR's pages fit again
#   - the module is reloaded without the parameter (built-in limits back)
# selftest-timeout=300
# shellcheck source-path=SCRIPTDIR source=../lib.sh
. "$(dirname "$0")/../lib.sh"

test_init 6

why=$(provider_unavailable)
[ -n "$why" ] || why=$(c_prog_unavailable)
[ "$RROCE_TYPE" = rroce ] || why=${why:-"max_objects is an rroce module parameter"}
G0=$(gid_index "$DEV0" "$(gid_v4 "$IP0")")
if [ -n "$why" ]; then
	for d in "build hostile_user" "reload with max_objects=64" "limits" "memlock" "reload without the parameter"; do
		ktap_skip "$d" "$why"
	done
	test_done
fi

t_begin "build selftests/c/hostile_user.c"
HU=$(c_prog hostile_user) || t_fail "cc failed: $HU"
t_end

MAXOBJ=64

t_begin "reload rroce with max_objects=$MAXOBJ: ibv_devinfo shows the caps"
if drv_reload max_objects=$MAXOBJ; then
	expect_eq "parameter" "$(cat /sys/module/rroce/parameters/max_objects)" $MAXOBJ
	info=$(ibv_devinfo -v -d "$DEV0" 2>&1)
	for k in max_qp max_cq max_mr max_mw max_pd max_srq max_ah; do
		expect_eq "$k" "$(awk -v k="$k:" '$1 == k {print $2; exit}' <<<"$info")" $MAXOBJ
	done
else
	t_fail "reload failed"
fi
t_end

G0=$(gid_index "$DEV0" "$(gid_v4 "$IP0")")
run_case() {
	local desc=$1 out rc
	shift
	t_begin "$desc"
	out=$(timeout $((150 * ${RROCE_TIMEOUT_SCALE:-1})) "$@" 2>&1)
	rc=$?
	while IFS= read -r l; do diag "$l"; done <<<"$out"
	[ $rc = 0 ] || t_fail "exited $rc"
	grep -q '^not ok' <<<"$out" && t_fail "a check failed"
	t_end
}

run_case "limits on $DEV0: each object type exhausted (ENOMEM), reclaimed, queue sizes at and above the maximum" \
	"$HU" "$DEV0" "$G0" limits

# memlock: an unprivileged user needs access to the uverbs nodes
modes=$(stat -c '%a %n' /dev/infiniband/uverbs*)
chmod 0666 /dev/infiniband/uverbs*
run_case "memlock as nobody without CAP_IPC_LOCK, ulimit -l 1024: ENOMEM beyond the limit, the charge given back" \
	bash -c 'ulimit -l 1024 && exec setpriv --reuid nobody --regid nogroup --clear-groups --inh-caps=-all \
		--bounding-set=-all "$@"' _ "$HU" "$DEV0" "$G0" memlock
while read -r m n; do chmod "$m" "$n"; done <<<"$modes"

t_begin "reload rroce without max_objects: built-in limits again"
if drv_reload; then
	expect_eq "parameter" "$(cat /sys/module/rroce/parameters/max_objects)" 0
	qp=$(ibv_devinfo -v -d "$DEV0" 2>&1 | awk '$1 == "max_qp:" {print $2; exit}')
	[ "${qp:-0}" -gt $MAXOBJ ] || t_fail "max_qp is $qp"
else
	t_fail "reload failed"
fi
t_end

test_done
