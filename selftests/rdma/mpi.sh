#!/usr/bin/env bash
# Open MPI 4.1 (pml ucx) over rroce with one rank in each namespace: rank 0
# on $DEV0 in init_net, rank 1 on $RDEV in $NS1 (Open MPI's rsh launcher
# with an agent that starts the remote daemon inside the namespace; each
# rank's UCX_NET_DEVICES names its own device, UCX_TLS=rc_verbs,ud_verbs).
# selftests/c/mpi_pingpong.c: a ping-pong 1 B .. 4 MiB with every byte
# checked, 20 timed round trips of 4 MiB and of 8 B (the figures, in a
# diag), then an MPI_Allreduce of 1 Mi doubles checked element by
# element; rroce0's counters must show the traffic (not TCP, not shared
# memory: btl tcp and vader are off).
# shellcheck source-path=SCRIPTDIR source=../lib.sh
. "$(dirname "$0")/../lib.sh"
test_init 4
agent=/tmp/rroce-mpi-rsh.$$
trap 'rm -f "$agent" "$PAIR_CLI"' EXIT

why=$(provider_unavailable)
for t in mpirun mpicc ucx_info; do
	command -v "$t" >/dev/null || why=${why:-$t not installed (openmpi-bin, libopenmpi-dev, ucx-utils)}
done
[ -n "$why" ] || why=$(datapath_unavailable "$DEV0" "$IP0")
[ "$RROCE_TYPE" = rxe ] && why=${why:-rxe has no network namespace support}
[ -n "$why" ] || why=$(hwc_missing "$DEV0")
if [ -n "$why" ]; then
	for i in 1 2 3; do ktap_skip "MPI over $DEV0 (part $i)" "$why"; done
	test_done
fi
peer_gids

t_begin "build selftests/c/mpi_pingpong.c (mpicc)"
bin=$(mpi_prog mpi_pingpong) || t_fail "mpicc: $(head -5 <<<"$bin" | tr '\n' ' ')"
t_end

# The rsh agent: Open MPI calls it as "AGENT [options] HOST COMMAND..."
# for each remote host; $IP1 is the namespace.
cat >"$agent" <<EOF
#!/bin/sh
h=\$1; shift
while [ "\${1#-}" != "\$1" ]; do shift; done
if [ "\$h" = $IP1 ]; then exec ip netns exec $NS1 env UCX_NET_DEVICES=$RDEV:1 sh -c "\$*"; fi
exec sh -c "\$*"
EOF
chmod +x "$agent"

t_begin "mpirun -np 2 (pml ucx over rc_verbs): rank 0 on $DEV0, rank 1 on $RDEV in $NS1: ping-pong and allreduce, data checked"
declare -A b a d
hwc_snap "$DEV0" b
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 UCX_NET_DEVICES="$DEV0:1" \
	timeout $((300 * ${RROCE_TIMEOUT_SCALE:-1})) mpirun -np 2 --host "$IP0,$IP1" \
	--mca plm_rsh_agent "$agent" --mca routed direct --mca oob_tcp_if_include 10.77.0.0/24 \
	--mca pml ucx --mca btl ^vader,tcp,openib,uct -x UCX_TLS=rc_verbs,ud_verbs \
	"$bin" >"$PAIR_CLI" 2>&1
rc=$?
hwc_snap "$DEV0" a
hwc_delta b a d
while read -r l; do diag "$l"; done < <(grep -E '^((not )?ok - |# ping-pong )' "$PAIR_CLI")
[ $rc = 0 ] || t_fail "mpirun exited $rc: $(grep -v '^ok - ' "$PAIR_CLI" | tail -4 | tr '\n' ' ')"
[ "$(grep -c '^ok - ' "$PAIR_CLI")" = 2 ] || t_fail "not both checks passed"
grep -q '^not ok' "$PAIR_CLI" && t_fail "data mismatch"
t_end

t_begin "the MPI traffic crossed $DEV0 (counters), without completion errors"
# The ping-pong alone moves ~110 MB each way.
[ "${d[tx_packets]}" -ge 20000 ] && [ "${d[rx_packets]}" -ge 20000 ] ||
	t_fail "$DEV0 counters do not show the MPI traffic:$(hwc_show d)"
[ "${d[completion_errors]}" = 0 ] && [ "${d[retry_exceeded]}" = 0 ] ||
	t_fail "$DEV0 counters show errors:$(hwc_show d)"
diag "$DEV0:$(hwc_show d)"
t_end

test_done
