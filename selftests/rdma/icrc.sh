#!/usr/bin/env bash
# Which CRC-32 computes rroce's ICRC (the `icrc` module parameter), and that
# each choice puts correct ICRCs on the wire:
#   1. with crc32-pclmul loaded (scripts/vm keeps udev from loading it at
#      boot), reloaded as the suite loads it (icrc=auto): the kernel log
#      names the table (crc32_le) and the crypto API's crc32 driver
#      (crc32-pclmul when the CPU has PCLMULQDQ) with the time each took for
#      1024 bytes, and the crypto API's is used if and only if it was at
#      least 10 % faster
#   2. icrc=bogus: insmod fails and the log says why
#   3-6. icrc=table, then icrc=crypto: reloaded with it, the log says which
#      is used; dumpcap on $IF0 while rc_xfer.py moves SEND/WRITE/READ
#      256 KiB each ($DEV0 <-> $DEV1, 64 KiB messages, so full 1 KiB
#      payloads, which icrc=crypto hands to the crypto API), every byte
#      checked and no ICRC error counted on either device; then
#      py/icrc_check.py recomputes the ICRC of every captured packet on its
#      own (zlib): none wrong.  (Both devices share the module, so a wrong
#      CRC on both ends would pass the transfer: the capture is the check.)
# Then crc32-pclmul is unloaded, rroce reloaded with icrc=auto; dmesg.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
. "$(dirname "$0")/../lib.sh"
test_init 7

why=
[ "$RROCE_TYPE" = rxe ] && why="rxe has no icrc parameter"
[ -n "$why" ] || why=$(provider_unavailable)
command -v dumpcap >/dev/null || why=${why:-dumpcap not installed}
rc_xfer_setup
[ -n "$why" ] || why=$RC_WHY
capture_init icrc


# The last "ICRC CRC-32" line of the kernel log since the test began, as
# "TABLE_NS DRIVER CRYPTO_NS USED WHY".
icrc_line() {
	dmesg_since_mark | grep 'rroce: ICRC CRC-32 over' | tail -1 |
		sed -nE 's/.*crc32_le ([0-9]+) ns, ([^ ]+) ([0-9]+) ns; using ([^ ]+) \((.*)\)$/\1 \2 \3 \4 \5/p'
}

if [ -n "$why" ]; then
	for _ in 1 2 3 4 5 6; do ktap_skip "icrc" "$why"; done
	test_done
fi

pclmul=$(grep -m1 -o -w pclmulqdq /proc/cpuinfo)
[ -z "$pclmul" ] || modprobe crc32_pclmul || diag "modprobe crc32_pclmul failed"

t_begin "icrc=auto (the default): both CRC-32s timed over 1024 bytes, the crypto API's used if 10 % faster"
if drv_reload; then
	read -r tns drv cns used whyu <<<"$(icrc_line)"
	diag "crc32_le ${tns:-?} ns, ${drv:-?} ${cns:-?} ns per 1024 bytes; using ${used:-?} (${whyu:-?}); CPU flag: ${pclmul:-no pclmulqdq}"
	if [ -z "$used" ]; then
		t_fail "no 'ICRC CRC-32 over' line in the kernel log: $(dmesg_since_mark | grep -m1 'rroce: ICRC')"
	else
		expect_eq "parameter" "$(cat /sys/module/rroce/parameters/icrc)" auto
		want=crc32_le
		[ $((cns * 10)) -lt $((tns * 9)) ] && want=$drv
		expect_eq "the one used" "$used" "$want"
		expect_eq "reason" "$whyu" icrc=auto
		[ -n "$pclmul" ] && expect_eq "crypto API driver on a CPU with PCLMULQDQ" "$drv" crc32-pclmul
	fi
else
	t_fail "reload failed"
fi
t_end

t_begin "icrc=bogus: insmod fails and says why"
links_del_all
drv_unload
if insmod "$RROCE_KO" icrc=bogus 2>"$TMPD/insmod.err"; then
	t_fail "insmod icrc=bogus succeeded"
else
	diag "insmod: $(tr '\n' ' ' <"$TMPD/insmod.err")"
	dmesg_since_mark | grep -q 'rroce: icrc=bogus: want auto, table or crypto' ||
		t_fail "no 'icrc=bogus: want auto, table or crypto' in the kernel log"
fi
drv_loaded && t_fail "rroce is loaded after a failed insmod"
t_end

for mode in table crypto; do
	cap=$TMPD/$mode.pcap
	t_begin "icrc=$mode: SEND/WRITE/READ 256 KiB each, data verified, no ICRC errors"
	ok=0
	if ! drv_reload icrc=$mode; then
		t_fail "reload with icrc=$mode failed"
	else
		read -r tns drv cns used whyu <<<"$(icrc_line)"
		diag "crc32_le ${tns:-?} ns, ${drv:-?} ${cns:-?} ns; using ${used:-?} (${whyu:-?})"
		expect_eq "reason" "$whyu" "icrc=$mode"
		if [ "$mode" = table ]; then expect_eq "used" "$used" crc32_le; else expect_eq "used" "$used" "$drv"; fi
		if capture_start "$cap"; then
			rc_xfer 180 --ops send,write,read --total 256K --msg 64K >/dev/null && ok=1
			expect_eq "rx_icrc_errors on $DEV0" "${XD0[rx_icrc_errors]:-0}" 0
			expect_eq "rx_icrc_errors on $DEV1" "${XD1[rx_icrc_errors]:-0}" 0
			sleep 1
			capture_stop
		fi
	fi
	t_end
	t_begin "icrc=$mode: every captured packet's ICRC recomputed by icrc_check.py is right"
	if [ $ok = 1 ]; then
		out=$(/usr/bin/python3 "$RROCE_REPO/selftests/py/icrc_check.py" "$cap" --min-v4 600 2>&1)
		rc=$?
		while IFS= read -r l; do diag "$l"; done <<<"$out"
		[ $rc = 0 ] || t_fail "icrc_check.py exited $rc"
		t_end
	else
		t_skip "no transfer to check"
	fi
done

# as the other scripts expect it: crc32-pclmul unloaded, rroce with icrc=auto
links_del_all
drv_unload
[ -z "$pclmul" ] || modprobe -r crc32_pclmul || diag "could not unload crc32_pclmul"
RROCE_NO_LINKS=0 topo_reset >/dev/null 2>&1 || diag "could not reload rroce with icrc=auto"
test_done
