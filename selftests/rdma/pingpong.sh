#!/usr/bin/env bash
# Data path smoke test with the libibverbs examples: RC loopback on one
# device, then RC/UD between rroce0 (init_net) and rroce1 (netns peer) over
# the veth pair; SRQ (ibv_srq_pingpong -c: several QPs share one SRQ, the
# receiver checks the data) at three message sizes; then UC with buffer
# validation (ibv_uc_pingpong -c: the server checks every page it received)
# in single- and multi-packet sizes.
# (The cross-namespace cases fail on rxe: no netns support.)
. "$(dirname "$0")/../lib.sh"
# SIZE ITERS of the UC cases between the two devices (MTU 1024: 1, 4 and
# 64 packets per message)
UC_CASES=("1 200" "4096 100" "65536 30")
test_init $((9 + ${#UC_CASES[@]}))

why=$(provider_unavailable)
command -v ibv_rc_pingpong >/dev/null || why=${why:-ibv_rc_pingpong missing}
if [ -z "$why" ] && [ "$RROCE_TYPE" = rroce ]; then
	# Skip (not fail) while the kernel does not take posted work: the data
	# path is its own milestone.  Any other probe failure is a failure.
	idx=$(gid_index "$DEV0" "$(gid_v4 "$IP0")")
	probe=$(/usr/bin/python3 "$RROCE_REPO/selftests/py/has_datapath.py" "$DEV0" "${idx:-1}" 2>&1)
	case $? in
	0) ;;
	4) why="no data path yet: $probe" ;;
	*) diag "data-path probe failed: $probe" ;;
	esac
fi
if [ -n "$why" ]; then
	for d in "RC loopback" "RC $DEV0 <-> $DEV1" "RC 64 KiB messages" "UD $DEV0 <-> $DEV1" \
		"SRQ 64 B" "SRQ 4 KiB" "SRQ 64 KiB" "UC loopback" "${UC_CASES[@]/#/UC }"; do
		ktap_skip "$d" "$why"
	done
	test_done
fi

port=18600
# pp PROG SERVER_NS SERVER_DEV CLIENT_DEV SERVER_IP ARGS...
pp() {
	local prog=$1 sns=$2 sdev=$3 cdev=$4 sip=$5 sidx cidx spid rc
	shift 5
	port=$((port + 1))
	sidx=$(gid_index "$sdev" "$(gid_v4 "$sip")")
	cidx=$(gid_index "$cdev" "$(gid_v4 "$IP0")")
	[ -n "$sidx" ] && [ -n "$cidx" ] || { t_fail "GID index not found ($sidx/$cidx)"; return; }
	local pre=()
	[ -n "$sns" ] && pre=(ip netns exec "$sns")
	# (`timeout` runs in the server's netns: its /proc/PID/net shows the port)
	"${pre[@]}" timeout 30 "$prog" -d "$sdev" -g "$sidx" -p "$port" "$@" >/tmp/pps.$$ 2>&1 &
	spid=$!
	if ! wait_for 10 tcp_listening_in "$spid" "$port"; then
		t_fail "$prog server did not start: $(tr '\n' ' ' </tmp/pps.$$)"
		kill $spid 2>/dev/null; wait $spid 2>/dev/null
		return
	fi
	timeout 30 "$prog" -d "$cdev" -g "$cidx" -p "$port" "$@" "$sip" >/tmp/ppc.$$ 2>&1
	rc=$?
	wait $spid
	local src=$?
	diag "client: $(grep -E "bytes in|Failed|error|Couldn" /tmp/ppc.$$ | head -3 | tr '\n' ' ')"
	[ $rc = 0 ] || t_fail "client exited $rc: $(tail -3 /tmp/ppc.$$ | tr '\n' ' ')"
	[ $src = 0 ] || t_fail "server exited $src: $(tail -3 /tmp/pps.$$ | tr '\n' ' ')"
	grep -q "iters in" /tmp/ppc.$$ || t_fail "client printed no result"
	rm -f /tmp/pps.$$ /tmp/ppc.$$
}

t_begin "RC loopback on $DEV0 (ibv_rc_pingpong -n 200)"
pp ibv_rc_pingpong "" "$DEV0" "$DEV0" "$IP0" -n 200
t_end

t_begin "RC $DEV0 (init_net) <-> $DEV1 (netns $NS1) (ibv_rc_pingpong -n 200)"
pp ibv_rc_pingpong "$NS1" "$DEV1" "$DEV0" "$IP1" -n 200
t_end

t_begin "RC 64 KiB messages $DEV0 <-> $DEV1 (segmented at MTU 1024)"
pp ibv_rc_pingpong "$NS1" "$DEV1" "$DEV0" "$IP1" -n 50 -s 65536 -m 1024
t_end

t_begin "UD $DEV0 <-> $DEV1 (ibv_ud_pingpong -n 200)"
pp ibv_ud_pingpong "$NS1" "$DEV1" "$DEV0" "$IP1" -n 200 -s 512
t_end

t_begin "SRQ 64 B $DEV0 <-> $DEV1 (ibv_srq_pingpong -c, 16 QPs on one SRQ, -n 20)"
pp ibv_srq_pingpong "$NS1" "$DEV1" "$DEV0" "$IP1" -c -s 64 -n 20
t_end

t_begin "SRQ 4 KiB $DEV0 <-> $DEV1 (ibv_srq_pingpong -c, 8 QPs, -n 20)"
pp ibv_srq_pingpong "$NS1" "$DEV1" "$DEV0" "$IP1" -c -s 4096 -q 8 -n 20
t_end

t_begin "SRQ 64 KiB $DEV0 <-> $DEV1 (ibv_srq_pingpong -c, 4 QPs, -r 64, -n 10, MTU 1024)"
pp ibv_srq_pingpong "$NS1" "$DEV1" "$DEV0" "$IP1" -c -s 65536 -q 4 -r 64 -n 10 -m 1024
t_end

t_begin "UC loopback on $DEV0 (ibv_uc_pingpong -c -s 4096 -n 100)"
PP_PROG=ibv_uc_pingpong rc_pingpong_chk 60 "" "$DEV0" "$IP0" "" "$DEV0" "$IP0" 4096 100
t_end

for c in "${UC_CASES[@]}"; do
	read -r size iters <<<"$c"
	t_begin "UC -c $size B x $iters: $DEV0 (init_net) client -> $DEV1 (netns $NS1) server (ibv_uc_pingpong, MTU 1024)"
	PP_PROG=ibv_uc_pingpong rc_pingpong_chk 90 "$NS1" "$DEV1" "$IP1" "" "$DEV0" "$IP0" "$size" "$iters" -m 1024
	t_end
done

test_done
