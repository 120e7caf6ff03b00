#!/usr/bin/env bash
# Queue-pair control verbs through the provider: RC/UC/UD creation with
# capability write-back, the modify_qp state machine with its errnos and
# value checks, query_qp, limits, reclaim at process exit.
. "$(dirname "$0")/../lib.sh"
test_init 2

why=$(provider_unavailable)
if [ -n "$why" ]; then
	ktap_skip "QP verbs" "$why"
	test_done
fi

t_begin "QP verbs through pyverbs on $DEV0"
idx=$(gid_index "$DEV0" "$(gid_v4 "$IP0")")
if [ -z "$idx" ]; then
	t_fail "no RoCE v2 GID for $IP0 on $DEV0"
else
	out=$(/usr/bin/python3 "$RROCE_REPO/selftests/py/qp_verbs.py" "$DEV0" "$idx" 2>&1)
	rc=$?
	while IFS= read -r l; do diag "$l"; done <<<"$out"
	[ $rc = 0 ] || t_fail "qp_verbs.py exited $rc"
	grep -q '^not ok' <<<"$out" && t_fail "a QP check failed"
fi
t_end

test_done
