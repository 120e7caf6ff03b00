#!/usr/bin/env bash
# UD error handling (py/ud_errors.py), UD QPs on $DEV0 and $DEV1: a send
# with a bad lkey -> LOC_PROT_ERR and the QP in SQE (sends behind flushed,
# receives still delivered), modify SQE -> RTS resumes sending; a wrong
# Q_Key is dropped silently; an AH to an unroutable GID is refused.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
. "$(dirname "$0")/../lib.sh"
test_init 2

why=$(provider_unavailable)
[ -n "$why" ] || why=$(datapath_unavailable "$DEV0" "$IP0")
peer_gids
PY_CHECKS_TMO=$((150 * ${RROCE_TIMEOUT_SCALE:-1}))
if [ -n "$why" ]; then
	ktap_skip "UD errors" "$why"
else
	py_checks "UD: send error -> SQE, flush, receives go on, SQE -> RTS; wrong Q_Key; unroutable AH" \
		ud_errors.py "$DEV0" "$G0" "$RDEV" "$G1"
fi

test_done
