#!/usr/bin/env bash
# Hostile packets (py/hostile_pkt.py): forged RoCEv2 datagrams sent with
# plain UDP sockets (and a few raw Ethernet frames) to port 4791 of $DEV1
# (over the veth) and of $DEV0 (loopback), aimed at live QPs whose QPNs,
# PSNs, R_Keys and VAs the script knows (one process opens both devices).
# Run twice: QPs connected over the IPv4 GIDs and IPv4 packets, then over
# the IPv6 GIDs and IPv6 packets (malformed ones go in both families):
#   - malformed: truncated short of BTH / RETH / AETH / AtomicETH / DETH /
#     ICRC, length not a multiple of 4, TVer != 0, unknown opcodes, pad
#     count lies, payload on READ requests and ACKs, wrong P_Key; wrong
#     ICRC on in-sequence WRITEs; wrong QPN (none, 0, UD QP, QP1, QPs in
#     RESET and INIT, UD opcode and CNP to an RC QP); UD with a wrong
#     Q_Key, to QP1, without a receive; PSNs ahead (one sequence NAK) and
#     in the past (SEND/WRITE re-ACKed, unknown READs of huge lengths and
#     atomics dropped, reserved BTH bits ignored); forged ACKs / NAKs /
#     READ responses / atomic ACKs to an idle requester; unusual IP fields
#     (TOS/ECN, TTL 1, IPv4 options, IPv6 traffic class, hop limit 1); an
#     in-sequence WRITE/SEND/READ from a source address that is not the
#     QP's peer ($ALT4 / $ALT6, added to $IF0 meanwhile):
#     each class must move exactly the hw_counters it should (rx_dropped,
#     rx_icrc_errors, out_of_sequence, duplicate_requests,
#     ignored_responses) and nothing else, leave the responder's memory
#     untouched and the live pair in RTS;
#   - in-sequence, valid-looking requests that IBA says must be NAKed
#     (random / other PD's / deregistered R_Key, RETH beyond the MR or
#     wrapping around 2^64, READ of 2 GiB - 1 and 4 GiB - 1, misaligned
#     atomic, bad ATOMIC WRITE, FLUSH without access, placement type or
#     a known selectivity level, payload above the path MTU, RETH length !=
#     payload, opcode sequence): one victim pair each; access_naks_sent /
#     invalid_naks_sent rise, the responder QP goes to ERR, the requester
#     (NAK for a PSN it never sent) stays RTS;
#   - IBTA 1.5 FLUSH as a responder (flush.sh runs this part alone);
#   - a READ flood (IPv4 run): 300 in-sequence READs of 16 MiB at a fresh
#     pair; the responder's response queue fills and drops the excess
#     unprocessed (resp_backpressure), nothing is NAKed, and destroying the
#     QP stops its queued responses;
#   - a flood of mixed harmless packets from 2 processes (30000, or 5000 on
#     the debug kernel; RROCE_HOSTILE_FLOOD overrides): every packet that
#     reached a device is accounted for by its counters.
# After each run SEND/WRITE/READ on the same live pair, a fresh RC pair and
# a UD datagram move data that is checked byte for byte.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
. "$(dirname "$0")/../lib.sh"
test_init 5
diag "setup: ${SECONDS}s"
ALT4=10.77.0.3 ALT6=fd77::3
trap 'ip addr del "$ALT4/24" dev "$IF0" 2>/dev/null; ip addr del "$ALT6/64" dev "$IF0" 2>/dev/null' EXIT

why=$(provider_unavailable)
[ -n "$why" ] || why=$(datapath_unavailable "$DEV0" "$IP0")
[ -n "$why" ] || [ "$RROCE_TYPE" != rxe ] || why="rroce-only: forged packets target rroce's counters and namespaces"
peer_gids
G0_6=$(gid_index "$DEV0" "$(gid_v6 "$IP6_0")")
G1_6=$(gid_index "$DEV1" "$(gid_v6 "$IP6_1")")
PY_CHECKS_TMO=$((300 * ${RROCE_TIMEOUT_SCALE:-1}))
FLOOD=${RROCE_HOSTILE_FLOOD:-$([ "${RROCE_KERNEL_FLAVOR:-plain}" = debug ] && echo 5000 || echo 30000)}

t_begin "hw_counters of $DEV0 and $DEV1 exist with the expected names"
if [ "$RROCE_TYPE" = rxe ]; then
	t_skip "rxe has other counters"
else
	w=$(hwc_missing "$DEV0")$(hwc_missing "$DEV1")
	[ -z "$w" ] || t_fail "$w"
	t_end
fi

if [ -n "$why" ]; then
	ktap_skip "hostile packets against live QPs (IPv4)" "$why"
	ktap_skip "hostile packets against live QPs (IPv6)" "$why"
	ktap_skip "flood of hostile packets" "$why"
	test_done
fi
diag "probes done: ${SECONDS}s"
ip addr add "$ALT4/24" dev "$IF0" && ip addr add "$ALT6/64" dev "$IF0" nodad ||
	diag "could not add $ALT4 / $ALT6 to $IF0"
py_checks "hostile IPv4 packets against live QPs: counters, QP states, memory; live and fresh QPs work after" \
	hostile_pkt.py "$DEV0" "$G0" "$RDEV" "$G1" --flood 0 --timeout "$RC_ACK_TIMEOUT" \
	--alt-src "$ALT4" --alt-src6 "$ALT6" --ifname "$IF0" --peer-ns "$NS1" --peer-if "$IF1"
diag "IPv4 run done: ${SECONDS}s"
if [ -z "$G0_6" ] || [ -z "$G1_6" ]; then
	ktap_fail "hostile IPv6 packets: no RoCE v2 GID of $IP6_0 on $DEV0 ('$G0_6') or $IP6_1 on $DEV1 ('$G1_6')"
else
	py_checks "hostile IPv6 packets against live QPs (connected over IPv6): counters, QP states, memory; QPs work after" \
		hostile_pkt.py "$DEV0" "$G0_6" "$RDEV" "$G1_6" --v6 --flood 0 --timeout "$RC_ACK_TIMEOUT" \
		--alt-src "$ALT4" --alt-src6 "$ALT6"
fi
diag "IPv6 run done: ${SECONDS}s"
py_checks "flood of $FLOOD hostile packets from 2 processes: all accounted for; live and fresh QPs work after" \
	hostile_pkt.py "$DEV0" "$G0" "$RDEV" "$G1" --only flood --flood "$FLOOD" --procs 2 --timeout "$RC_ACK_TIMEOUT"
ip addr del "$ALT4/24" dev "$IF0"
ip addr del "$ALT6/64" dev "$IF0"
diag "flood done: ${SECONDS}s"

test_done
