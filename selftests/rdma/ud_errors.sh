#!/usr/bin/env bash
# UD error handling (py/ud_errors.py), UD QPs on $DEV0 and $DEV1: a send
# with a bad lkey -> LOC_PROT_ERR and the QP in SQE (sends behind flushed,
# receives still delivered), modify SQE -> RTS resumes sending; a wrong
# Q_Key is dropped silently; an AH to an unroutable GID is refused.  Then
# selftests/c/ud_routes.c: one UD QP's datagrams to a peer, to a multicast
# group with a member on its own device, and to the peer again all arrive
# (each takes its own route).
# shellcheck source-path=SCRIPTDIR source=../lib.sh
. "$(dirname "$0")/../lib.sh"
test_init 3

why=$(provider_unavailable)
[ -n "$why" ] || why=$(datapath_unavailable "$DEV0" "$IP0")
peer_gids
PY_CHECKS_TMO=$((150 * ${RROCE_TIMEOUT_SCALE:-1}))
if [ -n "$why" ]; then
	ktap_skip "UD errors" "$why"
else
	py_checks "UD: send error -> SQE, flush, receives go on, SQE -> RTS; wrong Q_Key; unroutable AH" \
		ud_errors.py "$DEV0" "$G0" "$RDEV" "$G1" "$(gid_index "$DEV0" "$(gid_of "$IP6_0")")"
fi

routes="one UD QP: datagrams to a peer, a multicast group (member on its own device), the peer (c/ud_routes.c)"
[ -n "$why" ] || why=$(c_prog_unavailable)
if [ -n "$why" ]; then
	ktap_skip "$routes" "$why"
else
	t_begin "$routes"
	if ! UR=$(c_prog ud_routes); then
		t_fail "cc failed: $UR"
	else
		timeout $((60 * ${RROCE_TIMEOUT_SCALE:-1})) "$UR" "$DEV0" "$G0" "$RDEV" "$G1" >/tmp/ur.$$ 2>&1
		rc=$?
		while read -r l; do diag "${l#\# }"; done </tmp/ur.$$
		[ "$rc" = 0 ] || t_fail "ud_routes exited $rc"
	fi
	rm -f /tmp/ur.$$
	t_end
fi

test_done
