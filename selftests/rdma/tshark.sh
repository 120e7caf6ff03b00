#!/usr/bin/env bash
# The wire format as others see it: dumpcap captures on rr0 while
# py/rc_xfer.py moves SEND, SEND_WITH_IMM, RDMA WRITE, WRITE_WITH_IMM and
# RDMA READ traffic between $DEV0 and $DEV1 (both directions cross rr0),
# once over IPv4 (GIDs of 10.77.0.1/10.77.0.2) and once over IPv6 (GIDs of
# fd77::1/fd77::2).  For each capture:
#   - tshark decodes every UDP 4791 packet as RoCEv2 ("RRoCE", Wireshark's
#     default for that port), with the BTH opcodes the traffic must have,
#     and finds no malformed packet and no expert warning or error from the
#     InfiniBand dissector.  (tshark flags a zero UDP checksum over IPv6 as
#     an error; RoCEv2 sends 0 there -- rxe does too, RFC 6935/6936 allow it
#     for tunnels, the ICRC covers the packet -- so that one item is only
#     reported.)
#   - py/icrc_check.py recomputes the ICRC of every packet (after checking
#     itself against known-answer vectors: a ConnectX-4 Lx capture and
#     Scapy's, IPv4 and IPv6) and finds none wrong; it must also catch an
#     ICRC broken on purpose in a copy of the capture.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
. "$(dirname "$0")/../lib.sh"
test_init 8

# 512 KiB per operation (64 KiB messages): some 2,800 packets per family;
# tshark decodes them in minutes under TCG, so more would risk the limit.
TSHARK_SIZE=${TSHARK_SIZE:-512K}
capture_init tshark

why=$(provider_unavailable)
for t in tshark dumpcap; do
	command -v "$t" >/dev/null || why=${why:-$t not installed}
done
[ -n "$why" ] || why=$(datapath_unavailable "$DEV0" "$IP0")
if [ "$RROCE_TYPE" = rxe ]; then
	why=${why:-"rxe 6.12 has no namespace support, and its same-device loopback never reaches the wire"}
fi

ICRC=("/usr/bin/python3" "$RROCE_REPO/selftests/py/icrc_check.py")
# The heuristic payload dissectors Wireshark tries on InfiniBand payloads
# (RPC-over-RDMA, iSER, SMB Direct, ...) misread random data as their
# protocol and report it malformed: they are switched off, InfiniBand stays.
TSHARK=(tshark -n)
for p in smc smb_direct rpcordma nvme-rdma lnet iser infiniband_sdp fcoib; do
	TSHARK+=(--disable-protocol "$p")
done

# 1
t_begin "icrc_check.py agrees with the known-answer ICRC vectors (IPv4, IPv4 options, IPv6)"
out=$("${ICRC[@]}" --selftest 2>&1)
rc=$?
while IFS= read -r l; do diag "$l"; done <<<"$out"
[ $rc = 0 ] || t_fail "icrc_check.py --selftest exited $rc"
t_end

# capture FAMILY FILE: dumpcap on rr0 while rc_xfer.py runs between the
# GIDs of FAMILY (4 or 6).  t_fail on any problem.
capture() {
	local fam=$1 cap=$2 a0=$IP0 a1=$IP1 g0 g1 rc
	[ "$fam" = 6 ] && a0=$IP6_0 a1=$IP6_1
	g0=$(gid_index "$DEV0" "$(gid_of "$a0")")
	g1=$(gid_index "$DEV1" "$(gid_of "$a1")")
	if [ -z "$g0" ] || [ -z "$g1" ]; then
		t_fail "no RoCE v2 GID of $a0 on $DEV0 ('$g0') or of $a1 on $DEV1 ('$g1')"
		return 1
	fi
	capture_start "$cap" || return 1
	timeout $((300 * ${RROCE_TIMEOUT_SCALE:-1})) /usr/bin/python3 "$RROCE_REPO/selftests/py/rc_xfer.py" \
		"$DEV0" "$g0" "$DEV1" "$g1" --timeout "$RC_ACK_TIMEOUT" --ops send,send_imm,write,write_imm,read \
		--total "$TSHARK_SIZE" --msg 64K --deadline 240 >"$TMPD/xfer.log" 2>&1
	rc=$?
	while IFS= read -r l; do diag "$l"; done <"$TMPD/xfer.log"
	[ $rc = 0 ] || t_fail "rc_xfer.py over IPv$fam exited $rc"
	# let the last ACKs reach the capture, then stop dumpcap (it flushes)
	sleep 1
	capture_stop
	[ -s "$cap" ] || t_fail "no capture file written"
	return $rc
}

# tshark_check CAP FAMILY: one subtest's assertions on what tshark makes of CAP
tshark_check() {
	local cap=$1 fam=$2 f="$TMPD/fields" n_udp n_ib n_mal bad ops o want
	# frame, UDP dst port, IB opcode, malformed, expert severities, messages
	if ! "${TSHARK[@]}" -r "$cap" -T fields -E separator='|' -E occurrence=a -E aggregator=';' \
		-e frame.number -e udp.dstport -e infiniband.bth.opcode -e _ws.malformed \
		-e _ws.expert.severity -e _ws.expert.message >"$f" 2>"$TMPD/tshark.err"; then
		t_fail "tshark -r failed: $(head -3 "$TMPD/tshark.err" | tr '\n' ' ')"
		return 1
	fi
	n_udp=$(grep -c . "$f")
	n_ib=$(awk -F'|' '$3 != ""' "$f" | grep -c .)
	diag "tshark: $n_udp UDP $ROCE_PORT packets, $n_ib decoded as InfiniBand (BTH)"
	diag "opcodes: $(awk -F'|' '{ n[$3]++ } END { for (o in n) printf "%s:%d ", o, n[o] }' "$f")"
	"${TSHARK[@]}" -r "$cap" -q -z expert 2>/dev/null | grep -v '^$' | head -20 | while IFS= read -r l; do diag "expert: $l"; done
	[ "$n_udp" -gt 0 ] || t_fail "no packets in the capture"
	expect_eq "packets tshark decodes as InfiniBand (RRoCE on UDP $ROCE_PORT by default)" "$n_ib" "$n_udp"
	n_mal=$(awk -F'|' '$4 != ""' "$f" | grep -c .)
	expect_eq "malformed packets" "$n_mal" 0
	# expert items of severity warning (0x600000) or error (0x800000),
	# except the zero UDP checksum over IPv6
	bad=$(awk -F'|' '{
		ns = split($5, sev, ";"); split($6, msg, ";")
		for (i = 1; i <= ns; i++)
			if (sev[i] + 0 >= 6291456 && msg[i] != "Illegal checksum value (0)")
				print "frame " $1 ": " msg[i]
	}' "$f")
	if [ -n "$bad" ]; then
		t_fail "expert warnings/errors: $(printf '%s\n' "$bad" | head -5 | tr '\n' ' ')"
	fi
	if [ "$fam" = 4 ] && grep -q "Illegal checksum value (0)" "$f"; then
		t_fail "zero UDP checksum flagged over IPv4 (where 0 means no checksum)"
	fi
	# RC SEND first/middle/last/last-imm, WRITE first/middle/last/last-imm,
	# READ request, response first/middle/last, ACK
	ops=" $(cut -d'|' -f3 "$f" | sort -un | tr '\n' ' ')"
	want="0 1 2 3 6 7 8 9 12 13 14 15 17"
	for o in $want; do
		case $ops in *" $o "*) ;; *) t_fail "no packet with BTH opcode $o (want all of $want; got$ops)" ;; esac
	done
}

# 2-7
for fam in 4 6; do
	cap=$TMPD/v$fam.pcap
	t_begin "capture on $IF0: SEND/WRITE/READ (+IMM) $TSHARK_SIZE each over IPv$fam, all data verified"
	skip=$why
	if [ -n "$skip" ]; then
		t_skip "$skip"
	else
		capture "$fam" "$cap" || skip="the IPv$fam capture failed"
		t_end
	fi
	t_begin "IPv$fam: tshark decodes all as RoCEv2/InfiniBand with the expected opcodes, nothing malformed, no expert warnings"
	if [ -n "$skip" ]; then
		t_skip "$skip"
	else
		tshark_check "$cap" "$fam"
		t_end
	fi
	t_begin "IPv$fam: the ICRC of every captured RoCEv2 packet is correct"
	if [ -n "$skip" ]; then
		t_skip "$skip"
	else
		out=$("${ICRC[@]}" "$cap" "--min-v$fam" 100 2>&1)
		rc=$?
		while IFS= read -r l; do diag "$l"; done <<<"$out"
		[ $rc = 0 ] || t_fail "icrc_check.py exited $rc"
		if [ "$fam" = 4 ]; then
			# the checker must notice a broken ICRC in this capture:
			# flip one bit in the last byte of the 10th packet
			/usr/bin/python3 - "$cap" "$TMPD/broken.pcap" <<-'EOF'
				import struct, sys
				b = bytearray(open(sys.argv[1], "rb").read())
				off = 24
				for _ in range(10):
				    caplen = struct.unpack_from("<I" if b[0] == 0xd4 else ">I", b, off + 8)[0]
				    last = off + 16 + caplen - 1
				    off += 16 + caplen
				b[last] ^= 0x01
				open(sys.argv[2], "wb").write(b)
			EOF
			out=$("${ICRC[@]}" "$TMPD/broken.pcap" 2>&1)
			rc=$?
			if [ $rc = 0 ] || ! grep -q "1 bad" <<<"$out"; then
				t_fail "icrc_check.py did not report exactly one bad ICRC in the doctored capture (exit $rc): $(head -3 <<<"$out" | tr '\n' ' ')"
			fi
		fi
		t_end
	fi
done

test_done
