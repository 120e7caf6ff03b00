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

py_checks "MR verbs through pyverbs on $DEV0" mr_verbs.py "$DEV0"

test_done
