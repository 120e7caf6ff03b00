#!/usr/bin/env bash
# Memory regions through the provider: keys, access-flag errnos, many
# registrations, page pinning accounted and released, reclaim at exit.
. "$(dirname "$0")/../lib.sh"
test_init 2

why=$(provider_unavailable)
if [ -n "$why" ]; then
	ktap_skip "MR verbs" "$why"
	test_done
fi

t_begin "MR verbs through pyverbs on $DEV0"
out=$(/usr/bin/python3 "$RROCE_REPO/selftests/py/mr_verbs.py" "$DEV0" 2>&1)
rc=$?
while IFS= read -r l; do diag "$l"; done <<<"$out"
[ $rc = 0 ] || t_fail "mr_verbs.py exited $rc"
grep -q '^not ok' <<<"$out" && t_fail "an MR check failed"
t_end

test_done
