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


py_checks "CQ verbs through pyverbs on $DEV0" cq_verbs.py "$DEV0"

test_done
