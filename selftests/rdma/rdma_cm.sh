#!/usr/bin/env bash
# RDMA connection manager over rroce: ib_core's MAD layer and CM run on the
# GSI QP (QP1, UD), so librdmacm applications connect by IP address.
# Server in netns peer on rroce1 (10.77.0.2), client in init_net on rroce0:
#   rping -V (data validated every iteration), ucmatose (RC, several
#   connections), rdma_server / rdma_client, and ib_send_bw / ib_write_bw
#   -R (perftest connecting with rdma_cm); then the counters moved and no
#   ICRC error was seen; udaddy (UD endpoints resolved through SIDR
#   REQ/REP on the GSI QP, then UD sends addressed by AH and Q_Key).
# (rxe has no netns support: with RROCE_TYPE=rxe everything is skipped.)
. "$(dirname "$0")/../lib.sh"
test_init 9

why=$(provider_unavailable)
[ "$RROCE_TYPE" = rxe ] && why=${why:-rxe has no network namespace support (its UDP socket lives in init_net only)}
for t in rping ucmatose udaddy rdma_server rdma_client ib_send_bw; do
	command -v "$t" >/dev/null || why=${why:-$t missing}
done

# cm_listening NETNS PORT: an rdma_cm id listens on PORT in NETNS (on the
# port: a listener of the previous subtest may not be gone yet).  Polled:
# the line is matched in bash, not by one more program (~0.3 s each on the
# debug kernel under TCG).
cm_listening() {
	local out re="LISTEN[^"$'\n'"]*:$2( |"$'\n'"|\$)"
	out=$(ns "$1" rdma res show cm_id 2>/dev/null) || return 1
	[[ $out =~ $re ]]
}

# cm_mark / cm_diag: after a failure, what each device counted since the
# mark, the QPs still there and the neighbours (a CM exchange that stalls
# shows as drops, retransmissions or a missing neighbour on one side).
declare -A cmb0 cmb1 cma0 cma1 cmd0 cmd1
cm_mark() { hwc_snap "$DEV0" cmb0; hwc_snap "$DEV1" cmb1; }
# cm_since: cmd0 / cmd1, what $DEV0 / $DEV1 counted since cm_mark
cm_since() {
	hwc_snap "$DEV0" cma0
	hwc_snap "$DEV1" cma1
	hwc_delta cmb0 cma0 cmd0
	hwc_delta cmb1 cma1 cmd1
}
cm_diag() {
	cm_since
	diag "since the subtest began: $DEV0:$(hwc_show cmd0); $DEV1:$(hwc_show cmd1)"
	diag "QPs: $(rdma res show qp 2>&1 | grep -v " 1 type GSI\| 0 type SMI" | tr '\n' ' ')"
	diag "neighbours: $(ip neigh show dev "$IF0" | tr '\n' ' '); $NS1: $(ns "$NS1" ip neigh show dev "$IF1" | tr '\n' ' ')"
}

# cm_pair DESC TMO PORT SERVER_CMD... -- CLIENT_CMD...: one subtest; the
# server runs in $NS1, the client in init_net once the server listens on
# PORT.
cm_pair() {
	local desc=$1 tmo=$(($2 * ${RROCE_TIMEOUT_SCALE:-1})) port=$3 srv=() spid src crc
	shift 3
	while [ $# -gt 0 ] && [ "$1" != -- ]; do srv+=("$1"); shift; done
	shift
	t_begin "$desc"
	if [ -n "$why" ]; then
		t_skip "$why"
		return 1
	fi
	cm_mark
	ns_bg "$NS1" timeout "$tmo" stdbuf -oL "${srv[@]}" >/tmp/cm-srv.$$ 2>&1
	spid=$!
	if ! wait_for 20 cm_listening "$NS1" "$port"; then
		t_fail "${srv[0]} server did not listen: $(tail -3 /tmp/cm-srv.$$ | tr '\n' ' ')"
		kill "$spid" 2>/dev/null
		wait "$spid" 2>/dev/null
		t_end
		return 1
	fi
	timeout "$tmo" stdbuf -oL "$@" >/tmp/cm-cli.$$ 2>&1
	crc=$?
	wait_for 20 not kill -0 "$spid" || kill "$spid" 2>/dev/null
	wait "$spid"
	src=$?
	[ "$crc" = 0 ] || t_fail "$1 client exited $crc: $(tail -4 /tmp/cm-cli.$$ | tr '\n' ' ')"
	[ "$src" = 0 ] || t_fail "${srv[0]} server exited $src: $(tail -4 /tmp/cm-srv.$$ | tr '\n' ' ')"
	[ "$crc$src" = 00 ] || cm_diag
	return 0
}

declare -A before after delta
hwc_snap "$DEV0" before

if cm_pair "rping -V -C 200 -S 4000: $DEV0 -> $DEV1 (data validated)" 120 7174 \
	rping -s -V -C 200 -S 4000 -a "$IP1" -- rping -c -V -C 200 -S 4000 -a "$IP1"; then
	grep -qi "error\|fail" /tmp/cm-cli.$$ && t_fail "client: $(grep -i "error\|fail" /tmp/cm-cli.$$ | head -2 | tr '\n' ' ')"
	t_end
fi

if cm_pair "ucmatose: 4 RC connections x 50 messages" 120 7471 \
	ucmatose -b "$IP1" -c 4 -C 50 -S 1000 -- ucmatose -s "$IP1" -c 4 -C 50 -S 1000; then
	grep -q "test complete" /tmp/cm-cli.$$ || t_fail "no 'test complete': $(tail -3 /tmp/cm-cli.$$ | tr '\n' ' ')"
	diag "client: $(grep -E "connect|complete|data transfers" /tmp/cm-cli.$$ | head -4 | tr '\n' ' ')"
	t_end
fi

if cm_pair "udaddy: 3 UD endpoints (SIDR) x 20 messages of 512 B" 120 7174 \
	udaddy -b "$IP1" -c 3 -C 20 -S 512 -- udaddy -s "$IP1" -c 3 -C 20 -S 512; then
	grep -q "test complete" /tmp/cm-cli.$$ || t_fail "client: no 'test complete': $(tail -3 /tmp/cm-cli.$$ | tr '\n' ' ')"
	grep -q "test complete" /tmp/cm-srv.$$ || t_fail "server: no 'test complete': $(tail -3 /tmp/cm-srv.$$ | tr '\n' ' ')"
	t_end
fi

if cm_pair "rdma_server / rdma_client (rdma_create_ep, send/recv)" 60 7471 \
	rdma_server -p 7471 -- rdma_client -s "$IP1" -p 7471; then
	grep -q "rdma_client: end 0" /tmp/cm-cli.$$ || t_fail "client did not end with 0: $(tail -3 /tmp/cm-cli.$$ | tr '\n' ' ')"
	# Both ignore their completions' status (a send and a receive flushed
	# after a failed connection end 0 too): no completion may be an error.
	cm_since
	[ "${cmd0[completion_errors]}${cmd1[completion_errors]}" = 00 ] ||
		t_fail "completion errors: $DEV0 +${cmd0[completion_errors]}, $DEV1 +${cmd1[completion_errors]}"
	t_end
fi

if cm_pair "ib_send_bw -R (rdma_cm connection) 4 KiB x 500" 120 18515 \
	ib_send_bw -R -d "$DEV1" -s 4096 -n 500 -F -- ib_send_bw -R -d "$DEV0" -s 4096 -n 500 -F "$IP1"; then
	grep -qE '^ *4096 +500' /tmp/cm-cli.$$ || t_fail "no result line: $(tail -3 /tmp/cm-cli.$$ | tr '\n' ' ')"
	t_end
fi

if cm_pair "ib_write_bw -R (rdma_cm connection) 64 KiB x 200" 120 18515 \
	ib_write_bw -R -d "$DEV1" -s 65536 -n 200 -F -- ib_write_bw -R -d "$DEV0" -s 65536 -n 200 -F "$IP1"; then
	grep -qE '^ *65536 +200' /tmp/cm-cli.$$ || t_fail "no result line: $(tail -3 /tmp/cm-cli.$$ | tr '\n' ' ')"
	t_end
fi

# CM churn under UD traffic: every CM MAD goes out on the GSI QP through an
# address handle that ib_cm creates and destroys without waiting for a
# grace period (RDMA_DESTROY_AH_SLEEPABLE not set), while UD sends read
# AHs under RCU; ib_mad posts those sends with interrupts disabled.  A
# use-after-free would show on the debug kernel (KASAN); the connections
# and the UD datagrams must all get through.
t_begin "CM churn (6 x ucmatose, 8 connections each) while udaddy moves UD datagrams"
if [ -n "$why" ]; then
	t_skip "$why"
else
	tmo=$((300 * ${RROCE_TIMEOUT_SCALE:-1}))
	ns_bg "$NS1" timeout "$tmo" udaddy -b "$IP1" -c 2 -C 100 -S 256 >/tmp/cm-ud-srv.$$ 2>&1
	upid=$!
	wait_for 20 cm_listening "$NS1" 7174 || t_fail "udaddy server did not listen: $(tail -2 /tmp/cm-ud-srv.$$ | tr '\n' ' ')"
	timeout "$tmo" udaddy -s "$IP1" -c 2 -C 100 -S 256 >/tmp/cm-ud-cli.$$ 2>&1 &
	ucpid=$!
	bad=0
	cm_mark
	for i in 1 2 3 4 5 6; do
		ns_bg "$NS1" timeout 120 ucmatose -b "$IP1" -c 8 -C 2 -S 100 >/tmp/cm-srv.$$ 2>&1
		spid=$!
		if ! wait_for 20 cm_listening "$NS1" 7471; then
			bad=1
			kill "$spid" 2>/dev/null
			wait "$spid"
			t_fail "round $i: ucmatose server did not listen (exit $?): $(tail -2 /tmp/cm-srv.$$ | tr '\n' ' ')"
			continue
		fi
		timeout 120 ucmatose -s "$IP1" -c 8 -C 2 -S 100 >/tmp/cm-cli.$$ 2>&1 || {
			bad=1
			t_fail "round $i: ucmatose client: $(tail -2 /tmp/cm-cli.$$ | tr '\n' ' ')"
		}
		wait_for 20 not kill -0 "$spid" || kill "$spid" 2>/dev/null
		wait "$spid" || { bad=1; t_fail "round $i: ucmatose server: $(tail -2 /tmp/cm-srv.$$ | tr '\n' ' ')"; }
	done
	wait "$ucpid"
	urc=$?
	wait "$upid"
	usrc=$?
	[ $urc = 0 ] && grep -q "test complete" /tmp/cm-ud-cli.$$ ||
		t_fail "udaddy client exited $urc: $(tail -2 /tmp/cm-ud-cli.$$ | tr '\n' ' ')"
	[ $usrc = 0 ] && grep -q "test complete" /tmp/cm-ud-srv.$$ ||
		t_fail "udaddy server exited $usrc: $(tail -2 /tmp/cm-ud-srv.$$ | tr '\n' ' ')"
	if [ $bad = 0 ]; then
		diag "6 rounds of 8 connections, udaddy 2 x 100 datagrams meanwhile"
	else
		cm_diag
	fi
	rm -f /tmp/cm-ud-srv.$$ /tmp/cm-ud-cli.$$
	t_end
fi

t_begin "counters: packets moved, no ICRC errors"
if [ -n "$why" ]; then
	t_skip "$why"
else
	hwc_snap "$DEV0" after
	hwc_delta before after delta
	diag "$DEV0 counters:$(hwc_show delta)"
	[ "${delta[rx_packets]}" -ge 1000 ] || t_fail "rx_packets +${delta[rx_packets]} (< 1000)"
	[ "${delta[rx_icrc_errors]}" = 0 ] || t_fail "rx_icrc_errors +${delta[rx_icrc_errors]}"
	# (completion_errors grow legitimately: every disconnect flushes the
	# receives still posted.)
	t_end
fi
rm -f /tmp/cm-srv.$$ /tmp/cm-cli.$$
test_done
