#!/usr/bin/env bash
# XRC: ibv_xsrq_pingpong between rroce0 (init_net) and rroce1 (netns peer)
# at two message sizes and with on-demand paging, then py/xrc.py: XRC SRQs
# of two PDs and CQs and of two XRC domains behind shared target QPs,
# SEND (with immediate), RDMA WRITE/READ and atomics naming an SRQ, all
# checked byte for byte; a key checked against the PD of the SRQ named;
# requests naming an SRQ of another domain or no SRQ dropped (the
# initiator's retries run out).  Then the counters.  Then py/xrc_switch.py:
# XRC requests written into a tap device whose packets name another SRQ
# than their message's first one (dropped, counted).  rdma_rxe has no XRC.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
. "$(dirname "$0")/../lib.sh"
# SIZE ITERS [EXTRA] of the ibv_xsrq_pingpong cases
XS_CASES=("4096 50" "65536 20 -m 1024" "4096 20 -o")
test_init $((${#XS_CASES[@]} + 4))

why=$(provider_unavailable)
[ -n "$why" ] || why=$(datapath_unavailable "$DEV0" "$IP0")
command -v ibv_xsrq_pingpong >/dev/null || why=${why:-ibv_xsrq_pingpong missing}
[ "$RROCE_TYPE" = rroce ] || why=${why:-rdma_rxe has no XRC}
peer_gids
if [ -n "$why" ]; then
	for c in "${XS_CASES[@]}"; do ktap_skip "ibv_xsrq_pingpong -s ${c%% *}" "$why"; done
	ktap_skip "XRC SRQs, domains and target QPs (py/xrc.py)" "$why"
	ktap_skip "counters: dropped requests for foreign SRQs, one access NAK" "$why"
	ktap_skip "an XRC message's packets all for the SRQ its first one named (py/xrc_switch.py)" "$why"
	test_done
fi
declare -A b0 b1 a0 a1 c0 c1
hwc_snap "$DEV0" b0
hwc_snap "$DEV1" b1

port=18700
for c in "${XS_CASES[@]}"; do
	read -r size iters extra <<<"$c"
	port=$((port + 1))
	t_begin "ibv_xsrq_pingpong -s $size -n $iters ${extra:-}: $DEV0 <-> $DEV1 (netns $NS1)"
	# shellcheck disable=SC2086 # $extra: optional flags
	ip netns exec "$NS1" timeout 60 ibv_xsrq_pingpong -d "$DEV1" -g "$G1" -p $port -s "$size" -n "$iters" $extra \
		>/tmp/xss.$$ 2>&1 &
	spid=$!
	if ! wait_for 10 tcp_listening_in "$spid" "$port"; then
		t_fail "server did not start: $(tr '\n' ' ' </tmp/xss.$$)"
		kill $spid 2>/dev/null
	else
		# shellcheck disable=SC2086
		timeout 60 ibv_xsrq_pingpong -d "$DEV0" -g "$G0" -p $port -s "$size" -n "$iters" $extra "$IP1" \
			>/tmp/xsc.$$ 2>&1
		rc=$?
	fi
	wait $spid
	src=$?
	diag "client: $(tail -2 /tmp/xsc.$$ 2>/dev/null | tr '\n' ' ')"
	diag "server: $(tail -2 /tmp/xss.$$ | tr '\n' ' ')"
	[ "${rc:-1}" = 0 ] || t_fail "client exited ${rc:-?}"
	[ "$src" = 0 ] || t_fail "server exited $src"
	grep -qi "fail\|error" /tmp/xsc.$$ /tmp/xss.$$ && t_fail "an error was printed"
	rm -f /tmp/xss.$$ /tmp/xsc.$$
	t_end
done

PY_CHECKS_TMO=$((300 * ${RROCE_TIMEOUT_SCALE:-1})) \
	py_checks "XRC SRQs, domains and target QPs (py/xrc.py)" xrc.py "$DEV0" "$G0" "$DEV1" "$G1"
hwc_snap "$DEV0" a0
hwc_snap "$DEV1" a1
hwc_delta b0 a0 c0
hwc_delta b1 a1 c1

t_begin "counters: dropped requests for foreign SRQs, one access NAK"
diag "$DEV0: $(hwc_show c0)"
diag "$DEV1: $(hwc_show c1)"
# Two SENDs, each sent once and retried once (retry_cnt 1).
[ "${c1[xrc_bad_srqn]}" = 4 ] || t_fail "$DEV1 dropped ${c1[xrc_bad_srqn]} requests for foreign SRQs, not 4"
[ "${c1[access_naks_sent]}" = 1 ] || t_fail "$DEV1 sent ${c1[access_naks_sent]} access NAKs, not 1"
# REM_ACCESS_ERR and two RETRY_EXC_ERR.
[ "${c0[completion_errors]}" = 3 ] || t_fail "$DEV0: ${c0[completion_errors]} completion errors, not 3"
[ "${c0[retry_exceeded]}" = 2 ] || t_fail "$DEV0: ${c0[retry_exceeded]} retries exceeded, not 2"
[ "${c1[completion_errors]}" = 0 ] || t_fail "$DEV1: ${c1[completion_errors]} completion errors"
[ "${c0[xrc_bad_srqn]}" = 0 ] || t_fail "$DEV0 dropped ${c0[xrc_bad_srqn]} XRC requests"
for n in rx_icrc_errors invalid_naks_sent; do
	[ "${c0[$n]}${c1[$n]}" = 00 ] || t_fail "$n: ${c0[$n]} / ${c1[$n]}"
done
t_end

desc="an XRC message's packets all for the SRQ its first one named (py/xrc_switch.py)"
if [ -c /dev/net/tun ]; then
	PY_CHECKS_TMO=$((120 * ${RROCE_TIMEOUT_SCALE:-1})) py_checks "$desc" xrc_switch.py --dev rroce9 --ifname rrtap0
else
	ktap_skip "$desc" "no /dev/net/tun"
fi
test_done
