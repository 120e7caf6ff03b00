#!/usr/bin/env bash
# A hostile user-space process against rroce (selftests/c/hostile_user.c,
# built here with cc -libverbs), one subtest per attack class, all on
# loopback QP pairs on $DEV0 (see the comments in hostile_user.c for the
# exact expectations of each):
#   sq_garbage        garbage send WQEs written into the mapped SQ ring behind
#                     the provider's back (random bytes, bad opcode, num_sge
#                     0xffff, 4 GiB SGEs, unknown flags, 2^31 inline bytes,
#                     reserved bytes) -> LOC_QP_OP_ERR; SGEs past the MR, at a
#                     kernel address, lkey 0 or of another PD -> LOC_PROT_ERR;
#                     an rkey of another PD -> REM_ACCESS_ERR; the QP in ERR,
#                     no byte written anywhere
#   sq_index          SQ producer index beyond the ring, backwards, +2^31,
#                     0xffffffff (then the raw doorbell) -> QP in ERR, nothing
#                     succeeds; a scribbled SQ consumer index is ignored
#   rq, srq           the same for receive WQEs (RQ and SRQ rings), a SEND
#                     arriving -> the receive fails, receiving QP in ERR, the
#                     SEND fails; wild RQ/SRQ producer indices -> QP in ERR
#   cq_index          CQ consumer index beyond the producer, backwards, +2^31
#                     -> IBV_EVENT_CQ_ERR, the transfer itself unaffected
#   atomics           a thread's __atomic_fetch_add on the word the device's
#                     FETCH_AND_ADDs target: neither kind lost, each result
#                     exact; a FETCH_AND_ADD into a region registered at
#                     another I/O address (ibv_reg_mr_iova) lands at the
#                     right word; one misaligned against its memory -> EINVAL
#   ud                UD WQEs with bad AH numbers, a QPN above 24 bits, RDMA
#                     opcodes, random bytes -> error completion, QP in ERR
#   uverbs            raw write()/ioctl()/mmap() garbage on the uverbs fd:
#                     unknown commands, bad lengths, bogus handles, counts and
#                     WQE sizes, legacy WRs, non-zero driver flags (EINVAL),
#                     bogus ioctl objects/methods/attributes -> all fail
#   destroy_inflight  destroy a QP / dereg the source or target MR under 8 MiB
#                     of WRITEs (the rest LOC_PROT_ERR / REM_ACCESS_ERR, then
#                     flushed, what succeeded is intact); destroy a busy CQ ->
#                     EBUSY
#   exit              children that exit, close the device or are SIGKILLed in
#                     the middle of a transfer: all their objects reclaimed
#                     (rdma resource, by pid)
#   fork              a forked child scribbles on every inherited ring mapping
#                     and rings doorbells: the parent still tears down cleanly
# Each class ends with a fresh QP pair moving data intact.  Meanwhile a
# well-behaved process runs py/rc_xfer.py ($DEV0 -> $DEV1, SEND/WRITE/READ,
# every byte checked) in a loop; every one of its runs that ends during the
# attacks (the one still going when they end is stopped and not counted),
# and one after them, must pass.  Then dmesg.
# selftest-timeout=600
# shellcheck source-path=SCRIPTDIR source=../lib.sh
. "$(dirname "$0")/../lib.sh"

CASES=(sq_garbage sq_index rq srq cq_index index_mover cq_overflow atomics ud uverbs destroy_inflight exit fork)
test_init $((${#CASES[@]} + 4))

why=$(provider_unavailable)
[ -n "$why" ] || why=$(datapath_unavailable "$DEV0" "$IP0")
[ -n "$why" ] || why=$(c_prog_unavailable)
rc_xfer_setup
[ -n "$why" ] || why=$RC_WHY

if [ -n "$why" ]; then
	t_begin "build selftests/c/hostile_user.c"; t_skip "$why"
	for c in "${CASES[@]}"; do ktap_skip "attack: $c" "$why"; done
	ktap_skip "well-behaved process during the attacks" "$why"
	ktap_skip "well-behaved process after the attacks" "$why"
	test_done
fi

t_begin "build selftests/c/hostile_user.c"
diag "setup (devices, data path, rc_xfer) took $SECONDS s"
t0=$SECONDS
HU=$(c_prog hostile_user) || t_fail "cc failed: $HU"
diag "built (or found up to date) in $((SECONDS - t0)) s"
t_end

# The well-behaved process: rc_xfer.py repeating its transfer (new
# contexts, QPs and MRs each run) until told to stop.  One process, not a
# loop of them: a Python start with pyverbs costs seconds of CPU in the
# debug VM, which the attacks need; for the same reason it pauses between
# runs (without the pause: 64 runs during the attacks on the debug kernel,
# which then took 421 s instead of 328).
TOTAL=$([ "${RROCE_KERNEL_FLAVOR:-plain}" = debug ] && echo 1M || echo 4M)
GOOD_DIR=$RROCE_REPO/build/selftests/hostile_user.good
rm -rf "$GOOD_DIR"
mkdir -p "$GOOD_DIR"
GOOD_TMO=$((120 * ${RROCE_TIMEOUT_SCALE:-1}))
/usr/bin/python3 "$RROCE_REPO/selftests/py/rc_xfer.py" "$DEV0" "$RC_G0" "$DEV1" "$RC_G1" \
	--ops send,write,read --total "$TOTAL" --msg 1M --timeout "$RC_ACK_TIMEOUT" \
	--deadline $((GOOD_TMO - 20)) --until "$GOOD_DIR/stop" --pause 4 >"$GOOD_DIR/out" 2>&1 &
good_pid=$!

CASE_TMO=$((240 * ${RROCE_TIMEOUT_SCALE:-1}))
for c in "${CASES[@]}"; do
	t_begin "attack: $c"
	if [ -z "$HU" ] || [ ! -x "$HU" ]; then
		t_skip "no hostile_user binary"
		continue
	fi
	start=$EPOCHSECONDS
	out=$(timeout "$CASE_TMO" "$HU" "$DEV0" "$G0" "$c" 2>&1)
	rc=$?
	while IFS= read -r l; do diag "$l"; done <<<"$out"
	diag "$c took $((EPOCHSECONDS - start)) s"
	[ $rc = 124 ] && t_fail "hostile_user $c killed after ${CASE_TMO}s"
	[ $rc != 0 ] && [ $rc != 124 ] && t_fail "hostile_user $c exited $rc"
	grep -q '^not ok' <<<"$out" && t_fail "a check of $c failed"
	t_end
done

t_begin "a well-behaved process (rc_xfer.py $DEV0 -> $DEV1, $TOTAL per op) during the attacks: every run verified"
diag "attacks done after $SECONDS s"
touch "$GOOD_DIR/stop"
# the run in progress is cut short (and not counted)
kill "$good_pid" 2>/dev/null
wait "$good_pid"
good_rc=$?
diag "last run of the well-behaved process ended after $SECONDS s"
runs=$(grep -cE '^run [0-9]+ (ok|FAIL)' "$GOOD_DIR/out")
fails=$(grep -cE '^run [0-9]+ FAIL' "$GOOD_DIR/out")
diag "rc_xfer.py runs during the attacks: ${runs:-0}, failed: ${fails:-0}"
grep -E '^run [0-9]+ FAIL|^FAIL|Error|Traceback' "$GOOD_DIR/out" | head -20 | while IFS= read -r l; do diag "$l"; done
[ "${runs:-0}" -ge 1 ] || t_fail "no run of the well-behaved process finished"
[ "${fails:-0}" = 0 ] || t_fail "$fails run(s) of the well-behaved process failed"
case $good_rc in
0) ;;
1) [ "${fails:-0}" != 0 ] || t_fail "the well-behaved process exited 1 without a failed run: $(tail -3 "$GOOD_DIR/out" | tr '\n' ' ')" ;;
143) ;; # SIGTERM above (or it ended just before: 0 or 1)
*) t_fail "the well-behaved process exited $good_rc: $(tail -3 "$GOOD_DIR/out" | tr '\n' ' ')" ;;
esac
t_end

t_begin "after the attacks: rc_xfer.py $DEV0 -> $DEV1 SEND/WRITE/READ $TOTAL each, verified"
rc_xfer 180 --ops send,write,read --total "$TOTAL" --msg 1M >/dev/null
t_end

test_done
