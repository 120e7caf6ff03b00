#!/usr/bin/env bash
# Kernel-consumer verbs (the API of in-kernel ULPs such as NVMe-oF): loads
# the test module selftests/kmod/rroce_kverbs_test.ko ($RROCE_KVERBS_KO,
# built by scripts/kmod.sh) with dev_a=$DEV0 dev_b=$DEV1.  The module runs
# its subtests from module init (RC QP pairs between the two devices,
# connected directly, traffic over the veth) and logs KTAP lines prefixed
# "rroce_kverbs: "; each of its results becomes one result here:
#   1-2    create/destroy PD, CQs (direct/softirq/workqueue), QPs; connect
#          RESET->INIT->RTR->RTS with query_qp after each step
#   3-9    SEND 1 B / 4 KiB / 64 KiB both ways, SEND_WITH_IMM, 3 SGEs each
#          side, inline SEND, zero-length SEND
#   10-12  RDMA WRITE 64 KiB and WRITE_WITH_IMM through B's
#          unsafe_global_rkey, RDMA READ 64 KiB
#   13     a chain of 32 SENDs, only the last signaled
#   14-15  ib_cqe completions: ib_process_cq_direct, IB_POLL_SOFTIRQ and
#          IB_POLL_WORKQUEUE CQs
#   16-17  bad lkey (SEND source, READ sink) -> LOC_PROT_ERR, flush, ERR
#   18     receive buffers reposted from a pool while the QP is in ERR:
#          flushed outside ib_post_recv, so the pool runs dry
#   19     B moves its QP to ERR from the .done of a RECV (softirq CQ):
#          the SEND's ACK still leaves, A's SEND completes with SUCCESS
#   20     posting beyond the queue depth -> -ENOMEM and *bad_wr
#   21     an SRQ: bad attributes, ib_post_srq_recv, SENDs into it, the
#          limit event once, QP in ERR flushes nothing of it
#   22-26  fast registration on B (ib_alloc_mr, ib_map_mr_sg of 3 pages,
#          IB_WR_REG_MR): WRITE/READ through the FR rkey; LOCAL_INV then
#          REM_ACCESS_ERR; a new key byte (old key refused); SEND_WITH_INV
#          (IB_WC_WITH_INVALIDATE); bad cases
#   27     REG_MR behind a SEND waiting in RNR runs at once (A WRITEs
#          through its rkey meanwhile) and completes after the SEND
# then: the module reported all of them and its summary line, and rmmod
# worked; and the usual dmesg check.  Every byte and completion is checked
# by the module (see the comments there).
#
# A driver without kernel verbs (ib_alloc_cq or ib_create_qp fail with
# exactly -EOPNOTSUPP; rroce before its kernel QPs) skips all subtests.
# On rxe (RROCE_TYPE=rxe) both QPs are on $DEV0: 6.12's rxe has no network
# namespace support, so $DEV1 in netns peer cannot take packets.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
. "$(dirname "$0")/../lib.sh"

KO=$RROCE_KVERBS_KO
KMOD=rroce_kverbs_test
N=
[ -f "$KO" ] && N=$(modinfo -F ktap_plan "$KO" 2>/dev/null)
case $N in '' | *[!0-9]*) N=0 ;; esac
test_init $((N + 2))
[ -f "$KO" ] || ktap_skip_all "test module not built ($KO; scripts/kmod.sh)"

A=$DEV0 B=$DEV1
if [ "$RROCE_TYPE" = rxe ]; then
	B=$DEV0
	diag "$RROCE_TYPE has no network namespace support: both QPs on $DEV0"
fi
wait_for 10 port_active "$B" || diag "$B port not active: $(port_state "$B")"
[ -d "/sys/module/$KMOD" ] && rmmod "$KMOD"

# Load: the subtests run inside insmod; the module bounds every wait by
# timeout_ms, and a killed insmod makes it stop early.
mark="rroce-selftest: kverbs insmod $$.$RANDOM"
echo "$mark" >/dev/kmsg
scale=${RROCE_TIMEOUT_SCALE:-1}
start=$EPOCHSECONDS
out=$(timeout -s KILL $((700 * scale)) insmod "$KO" dev_a="$A" dev_b="$B" \
	timeout_ms=$((20000 * scale)) 2>&1)
rc=$?
took=$((EPOCHSECONDS - start))
lines=$(dmesg | awk -v m="$mark" 'index($0, m) { seen = 1; next } seen' |
	sed -n 's/^.*\] rroce_kverbs: //p')

unsup='' summary='' bad=''
while IFS= read -r l; do
	if [[ $l =~ ^(not )?ok\ ([0-9]+)\ -\ (.*)$ ]]; then
		num=${BASH_REMATCH[2]} rest=${BASH_REMATCH[3]}
		if [ "$num" -le "$_t_num" ] || [ "$num" -gt "$N" ]; then
			bad="unexpected result number $num"
			continue
		fi
		while [ $((_t_num + 1)) -lt "$num" ]; do
			ktap_fail "module subtest $((_t_num + 1)): no result in the kernel log"
		done
		if [ -n "${BASH_REMATCH[1]}" ]; then
			ktap_fail "$rest"
		elif [[ $rest == *" # SKIP "* ]]; then
			ktap_skip "${rest%% # SKIP *}" "${rest#* # SKIP }"
		else
			ktap_pass "$rest"
		fi
	else
		case $l in
		"KTAP version"* | 1..*) ;;
		"unsupported: "*) unsup=${l#unsupported: } ;;
		*" passed, "*" failed, "*" skipped") summary=$l ;;
		"# "*) diag "${l#\# }" ;;
		*) diag "$l" ;;
		esac
	fi
done <<<"$lines"
while [ "$_t_num" -lt "$N" ]; do
	ktap_fail "module subtest $((_t_num + 1)): no result in the kernel log"
done

t_begin "insmod $KMOD dev_a=$A dev_b=$B: all $N results and the summary line; rmmod"
diag "insmod took ${took}s, exit $rc${out:+: $out}"
if [ $rc = 137 ]; then
	t_fail "insmod killed after $((700 * scale))s"
elif [ $rc != 0 ]; then
	t_fail "insmod exited $rc"
fi
[ -n "$summary" ] || t_fail "no 'N passed, N failed, N skipped' line from the module"
[ -z "$bad" ] || t_fail "$bad"
if [ -n "$unsup" ]; then
	# only -EOPNOTSUPP means "no kernel verbs"; the subtests were skipped
	case $unsup in
	*"= -95 (EOPNOTSUPP)") diag "$RROCE_TYPE has no kernel-consumer verbs: $unsup" ;;
	*) t_fail "unsupported for an unexpected reason: $unsup" ;;
	esac
fi
if [ -d "/sys/module/$KMOD" ]; then
	expect_ok "rmmod" rmmod "$KMOD"
fi
t_end

test_done
