#!/usr/bin/env bash
# Host-side checks of selftests/lib.sh helpers that replaced a program run
# in the guest (scripts/host-test.sh runs this).  Prints TAP; exits non-zero
# on a failure.
set -u
. "$(dirname "$0")/lib.sh"
n=0 bad=0
check() { # check DESC GOT WANT
	n=$((n + 1))
	if [ "$2" = "$3" ]; then echo "ok $n - $1"; else echo "not ok $n - $1: got '$2', want '$3'"; bad=$((bad + 1)); fi
}
# gid_v6 against Python's ipaddress (what it replaced)
for a in fd77::1 fd77::3 FE80::5054:ff:fe79:1 ::1 :: 1:2:3:4:5:6:7:8 fd77:0:0:1:: 2001:db8::a:b 1::8; do
	want=$(/usr/bin/python3 -c 'import ipaddress, sys; print(ipaddress.IPv6Address(sys.argv[1]).exploded)' "$a")
	check "gid_v6 $a" "$(gid_v6 "$a")" "$want"
done
for a in 1:2 fd77::zz 1:2:3:4:5:6:7:8:9 1::2::3 12345::1 1:2:3:4:5:6:7:- 1:2:3:4:5:6:7:8:: "" "*"; do
	got=$(gid_v6 "$a" 2>/dev/null) && got="$got (status 0)"
	check "gid_v6 $a is refused" "$got" ""
done
# wait_for and nap start no process while they wait (they replaced date(1)
# and sleep(1) polls), and keep their times.
ms() { local t=${EPOCHREALTIME/[.,]/}; echo $((t / 1000)); }
t0=$(ms); nap 0.3; dt=$(($(ms) - t0))
check "nap 0.3 sleeps 0.3 s" "$([ $dt -ge 290 ] && [ $dt -lt 1000 ] && echo yes || echo "no: $dt ms")" yes
t0=$(ms); wait_for 1 false; rc=$?; dt=$(($(ms) - t0))
check "wait_for 1 false: false after 1 s" "$rc $([ $dt -ge 1000 ] && [ $dt -lt 2000 ] && echo in-time || echo "$dt ms")" "1 in-time"
f=$(mktemp -u)
(nap 0.7; : >"$f") &
t0=$(ms); wait_for 5 test -e "$f"; rc=$?; dt=$(($(ms) - t0))
check "wait_for sees a change within 0.5 s" "$rc $([ $dt -ge 700 ] && [ $dt -lt 1300 ] && echo in-time || echo "$dt ms")" "0 in-time"
wait; rm -f "$f"
if command -v strace >/dev/null; then
	execs=$(strace -f -qq -e trace=execve -e signal=none bash -c ". '$(dirname "$0")/lib.sh'; nap 0.01; wait_for 1 false" 2>&1 | grep -c '^\[pid .*execve\|^execve')
	check "wait_for 1 false starts no process (execve calls)" "$execs" 1
fi
# ns_bg: `kill $!` ends the command itself, not a subshell around it (a
# rdma_cm server "killed" that way ran on, holding its port, and failed
# the next test; CI, 2026-12-05).  A stand-in for ip(8) execs the command.
d=$(mktemp -d)
printf '#!/bin/sh\nshift 3\nexec "$@"\n' >"$d/ip" && chmod +x "$d/ip"
tag=rroce-nsbg-$$
PATH=$d:$PATH ns_bg x bash -c "exec -a $tag sleep 30" >/dev/null 2>&1
p=$!
wait_for 2 pgrep -f "^$tag"
check "ns_bg: the command runs" "$(pgrep -f "^$tag" >/dev/null && echo running)" running
kill "$p" 2>/dev/null
wait "$p" 2>/dev/null
nap 0.2
check "ns_bg: kill \$! ends the command" "$(pgrep -f "^$tag" || echo gone)" gone
pkill -f "^$tag" 2>/dev/null
rm -rf "$d"
# and no script backgrounds the ns function itself (commands continued
# over several lines joined first: ucx.sh's io_demo server was one)
check "no 'ns ... &' in the scripts" "$(awk '{ l = l $0 } /\\$/ { sub(/\\$/, "", l); next }
	{ if (l ~ /^[[:space:]]*ns [^|;]*&[[:space:]]*$/) print FILENAME ":" FNR ": " l; l = "" }' "$RROCE_SELFTESTS"/rdma/*.sh)" ""
# tcp_listening_in reads /proc/PID/net/tcp and tcp6 (it replaced ss(8))
lf=$(mktemp)
for fam in 4 6; do
	/usr/bin/python3 -c '
import socket, sys, time
fam = socket.AF_INET if sys.argv[1] == "4" else socket.AF_INET6
s = socket.socket(fam)
s.bind(("127.0.0.1" if sys.argv[1] == "4" else "::1", 0))
c = socket.socket(fam)
c.bind(("127.0.0.1" if sys.argv[1] == "4" else "::1", 0))
print(s.getsockname()[1], c.getsockname()[1], flush=True)
s.listen()
time.sleep(5)' "$fam" >"$lf" 2>&1 &
	lp=$!
	wait_for 3 grep -q . "$lf"
	read -r lport bport <"$lf"
	wait_for 2 tcp_listening_in "$lp" "$lport"
	check "tcp_listening_in: IPv$fam listener" "$(tcp_listening_in "$lp" "$lport" && echo yes)" yes
	check "tcp_listening_in: IPv$fam port bound, not listening" "$(tcp_listening_in "$lp" "$bport" || echo no)" no
	kill "$lp"
	wait "$lp" 2>/dev/null
	check "tcp_listening_in: a process that is gone" "$(tcp_listening_in "$lp" "$lport" || echo no)" no
done
rm -f "$lf"
echo "1..$n"
[ "$bad" = 0 ]
