#!/usr/bin/env bash
# Completion queues through the provider: mapped ring geometry, empty polls,
# notification arming, errnos for bad sizes and vectors, many CQs, and
# reclaim at process exit.
. "$(dirname "$0")/../lib.sh"
test_init 2

why=$(provider_unavailable)
if [ -n "$why" ]; then
	ktap_skip "CQ verbs" "$why"
	test_done
fi


t_begin "CQ verbs through pyverbs on $DEV0"
out=$(/usr/bin/python3 "$RROCE_REPO/selftests/py/cq_verbs.py" "$DEV0" 2>&1)
rc=$?
while IFS= read -r l; do diag "$l"; done <<<"$out"
[ $rc = 0 ] || t_fail "cq_verbs.py exited $rc"
grep -q '^not ok' <<<"$out" && t_fail "a CQ check failed"
t_end

test_done
