#!/usr/bin/env bash
# On-demand paging regions (py/odp.py): registered over anonymous memory the
# process has not touched, so the device faults every page in (nothing is
# pinned: VmPin unchanged, no page resident after registration).  RDMA WRITE (16 MiB),
# READ (zeros of never-touched memory, then a WRITE needing writable pages),
# memory freed and mapped again at the same address (READ sees the new
# bytes, WRITE lands in the new memory), SEND from and into on-demand
# buffers (also with an SRQ), compare-and-swap and fetch-and-add, an
# implicit region (the whole address space) at two mappings,
# ibv_advise_mr(PREFETCH_WRITE), and a WRITE into memory the process made
# inaccessible (REM_ACCESS_ERR, the other QP pair unharmed), addresses
# outside user space through the implicit region (prefetch EINVAL, WRITE
# REM_ACCESS_ERR) -- all checked byte for byte.  Then the counters: both
# devices faulted pages in (odp_faults), the responder NAKed exactly those
# three accesses, and the only completion errors are those three requests' and
# the UD receive into memory that cannot be faulted in.  $DEV1 owns the
# memory, $DEV0 accesses it.  rdma_rxe of 6.12 has no on-demand paging: skipped there.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
. "$(dirname "$0")/../lib.sh"
test_init 4

desc="on-demand paging regions ($DEV0 -> $DEV1)"
why=$(provider_unavailable)
[ -n "$why" ] || why=$(datapath_unavailable "$DEV0" "$IP0")
[ "$RROCE_TYPE" = rroce ] || why=${why:-rdma_rxe in 6.12 has no on-demand paging}
peer_gids
if [ -n "$why" ]; then
	ktap_skip "$desc" "$why"
	ktap_skip "counters: page faults on both devices, three access NAKs, three completion errors" "$why"
	ktap_skip "an atomic out of sequence on an on-demand page: sequence NAK, no stall (py/odp_wire.py)" "$why"
	test_done
fi
declare -A b0 b1 a0 a1 c0 c1
hwc_snap "$DEV0" b0
hwc_snap "$DEV1" b1
# 16 MiB transfers, 4 on the debug kernel (KASAN makes faulting pages in
# and copying them ~10 times slower under TCG).
mib=16
[ "${RROCE_KERNEL_FLAVOR:-plain}" = debug ] && mib=4
PY_CHECKS_TMO=$((600 * ${RROCE_TIMEOUT_SCALE:-1})) \
	py_checks "$desc" odp.py "$DEV0" "$G0" "$DEV1" "$G1" --mib "$mib"
hwc_snap "$DEV0" a0
hwc_snap "$DEV1" a1
hwc_delta b0 a0 c0
hwc_delta b1 a1 c1

t_begin "counters: page faults on both devices, three access NAKs, three completion errors"
diag "$DEV0: $(hwc_show c0)"
diag "$DEV1: $(hwc_show c1)"
[ "${c0[odp_faults]}" -gt 0 ] || t_fail "$DEV0 (the source of the on-demand SEND) faulted no page in"
[ "${c1[odp_faults]}" -gt 0 ] || t_fail "$DEV1 faulted no page in"
[ "${c1[access_naks_sent]}" = 3 ] || t_fail "$DEV1 sent ${c1[access_naks_sent]} access NAKs, not 3"
# The requesters' three REM_ACCESS_ERRs, then the flushes of those QPs' nothing.
[ "${c0[completion_errors]}" = 3 ] || t_fail "$DEV0: ${c0[completion_errors]} completion errors, not 3"
# The UD receive into memory that cannot be faulted in.
[ "${c1[completion_errors]}" = 1 ] || t_fail "$DEV1: ${c1[completion_errors]} completion errors, not 1"
for n in rx_icrc_errors invalid_naks_sent; do
	[ "${c0[$n]}${c1[$n]}" = 00 ] || t_fail "$n: ${c0[$n]} / ${c1[$n]}"
done
t_end

wire="an atomic out of sequence on an on-demand page: sequence NAK, no stall (py/odp_wire.py)"
if [ -c /dev/net/tun ]; then
	PY_CHECKS_TMO=$((120 * ${RROCE_TIMEOUT_SCALE:-1})) py_checks "$wire" odp_wire.py --dev rroce9 --ifname rrtap0
else
	ktap_skip "$wire" "no /dev/net/tun"
fi
test_done
