#!/usr/bin/env bash
# Host-side checks of the selftests/lib.sh helpers and the run.sh code that
# replaced a program run in the guest (scripts/host-test.sh runs this).
# Prints TAP; exits non-zero on a failure.
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
	# (bg_logged: $lf still holds the IPv4 run's ports when the IPv6 one
	# starts; read before the child had emptied it, they failed the check
	# in make check runs beside two kernel builds)
	bg_logged "$lf" /usr/bin/python3 -c '
import socket, sys, time
fam = socket.AF_INET if sys.argv[1] == "4" else socket.AF_INET6
s = socket.socket(fam)
s.bind(("127.0.0.1" if sys.argv[1] == "4" else "::1", 0))
c = socket.socket(fam)
c.bind(("127.0.0.1" if sys.argv[1] == "4" else "::1", 0))
s.listen()
print(s.getsockname()[1], c.getsockname()[1], flush=True)
time.sleep(120)' "$fam"
	lp=$!
	wait_for 60 grep -q . "$lf"
	read -r lport bport <"$lf"
	check "tcp_listening_in: IPv$fam listener" "$(tcp_listening_in "$lp" "$lport" && echo yes)" yes
	check "tcp_listening_in: IPv$fam port bound, not listening" "$(tcp_listening_in "$lp" "$bport" || echo no)" no
	kill "$lp"
	wait "$lp" 2>/dev/null
	check "tcp_listening_in: a process that is gone" "$(tcp_listening_in "$lp" "$lport" || echo no)" no
done
rm -f "$lf"
# bg_logged empties its file before the command starts: a has_line poll
# right after it must not see the last run's lines
bf=$(mktemp)
echo ready >"$bf"
bg_logged "$bf" sleep 0.3
if has_line "$bf" '^ready'; then bs=stale; else bs=empty; fi
check "bg_logged: the file is empty when it returns (no stale line)" "$bs" empty
wait $!
bg_logged "$bf" echo hello
wait $!
check "bg_logged: the command's output lands in the file" "$(cat "$bf")" hello
rm -f "$bf"
# The framing that every script and run.sh go through starts no program
# where bash alone does (each costs ~0.3 s on the debug kernel under TCG).
# ip_addrs parses `ip -o addr show` as the awk it replaced did.
ipo='5: rr0@if4    inet 10.77.0.1/24 scope global rr0\       valid_lft forever preferred_lft forever
5: rr0@if4    inet 10.77.0.9/24 brd 10.77.0.255 scope global secondary rr0\       valid_lft forever preferred_lft forever
5: rr0@if4    inet6 fd77::1/64 scope global nodad \       valid_lft forever preferred_lft forever
5: rr0@if4    inet6 fe80::1/64 scope link \       valid_lft forever preferred_lft forever'
check "ip_addrs inet" "$(ip_addrs inet <<<"$ipo" | tr '\n' ' ')" "10.77.0.1/24 10.77.0.9/24 "
check "ip_addrs inet6 global" "$(ip_addrs inet6 global <<<"$ipo")" "fd77::1/64"
check "ip_addrs inet6" "$(ip_addrs inet6 <<<"$ipo" | tr '\n' ' ')" "fd77::1/64 fe80::1/64 "
# gid_table / gid_index on a made-up sysfs port: by index (not by name:
# 10 after 9), empty and zero entries left out, a lookup takes the first
# entry with the GID and the type
d=$(mktemp -d)
mkdir -p "$d/dev/ports/1/gids" "$d/dev/ports/1/gid_attrs/types"
z=0000:0000:0000:0000:0000:0000:0000:0000
v4=$(gid_v4 10.77.0.1)
for i in $(seq 0 11); do echo "$z" >"$d/dev/ports/1/gids/$i"; : >"$d/dev/ports/1/gid_attrs/types/$i"; done
echo "fe80:0000:0000:0000:5054:00ff:fe79:0001" >"$d/dev/ports/1/gids/0"; echo "IB/RoCE v1" >"$d/dev/ports/1/gid_attrs/types/0"
echo "$v4" >"$d/dev/ports/1/gids/9"; echo "IB/RoCE v1" >"$d/dev/ports/1/gid_attrs/types/9"
echo "$v4" >"$d/dev/ports/1/gids/10"; echo "RoCE v2" >"$d/dev/ports/1/gid_attrs/types/10"
echo "$v4" >"$d/dev/ports/1/gids/11"; echo "RoCE v2" >"$d/dev/ports/1/gid_attrs/types/11"
check "gid_table: valid entries by index" "$(SYS_IB=$d gid_table dev | cut -d' ' -f1 | tr '\n' ' ')" "0 9 10 11 "
check "gid_index: first RoCE v2 entry" "$(SYS_IB=$d gid_index dev "$v4")" 10
check "gid_index: other type" "$(SYS_IB=$d gid_index dev "$v4" "IB/RoCE v1")" 9
check "gid_index: absent GID is false" "$(SYS_IB=$d gid_index dev "$(gid_v4 10.77.0.2)" || echo false)" false
rm -rf "$d"
# check_dmesg's test matches lines as grep -E "$DMESG_BAD" does (".*" within
# one line only)
for l in "BUG: KASAN: slab-use-after-free in x" "WARNING: CPU: 1 PID: 2 at x" "rcu: INFO: rcu_preempt self-detected stall on CPU" \
	"INFO: task cat:12 blocked for more than 30 seconds." "watchdog: BUG: soft lockup - CPU#1 stuck for 7s!" \
	"rroce: link rroce0 added" "INFO: task list follows" "a line that says blocked"; do
	want=$(printf '%s\n' "$l" | grep -Ec "$DMESG_BAD")
	got=0
	[[ $l =~ ${DMESG_BAD//.\*/[^$'\n']*} ]] && got=1
	check "DMESG_BAD in bash: $l" "$got" "$want"
done
ml=$'INFO: task list follows\nsomething else blocked'
got=0
[[ $ml =~ ${DMESG_BAD//.\*/[^$'\n']*} ]] && got=1
check "DMESG_BAD in bash: .* does not span lines" "$got" 0
# run.sh counts each script's subtests as the grep/sed it replaced did,
# and starts no program per script but timeout(1) and the script
d=$(mktemp -d)
mkdir "$d/rdma"
cp "$RROCE_SELFTESTS/run.sh" "$d/"
printf '#!/bin/sh\necho "1..4"; echo "ok 1 - a"; echo "ok 2 - b # SKIP c"; echo "not ok 3 - d"; printf "ok 4 - e"\n' >"$d/rdma/t1.sh"
printf '#!/bin/sh\n# selftest-timeout=7\necho "1..3"; echo "ok 1 - a"\n' >"$d/rdma/t2.sh"
printf '#!/bin/sh\necho "1..1"; echo "ok 1 - a # SKIP b"; exit 4\n' >"$d/rdma/t3.sh"
chmod +x "$d"/rdma/*.sh
out=$(RROCE_RESULTS=$d/res "$d/run.sh" 2>&1)
check "run.sh: summary" "$(tail -1 <<<"$out")" "3 passed, 2 failed, 2 skipped"
check "run.sh: verdicts" "$(grep -E '^(not )?ok [0-9]+ selftests' <<<"$out" | sed 's/ (.*//' | tr '\n' '|')" \
	"not ok 1 selftests: rdma: t1 # exit=0|not ok 2 selftests: rdma: t2 # ran 1 of 3 planned subtests|ok 3 selftests: rdma: t3 # SKIP|"
check "run.sh: the scripts' TAP indented, a last line without newline too" "$(grep -c '^# ok 4 - e$' <<<"$out")" 1
# RROCE_CLAIMS: two run.sh at once share the scripts, each runs once in all
mkdir "$d/claims"
for k in 4 5 6 7 8 9; do printf '#!/bin/sh\necho "1..1"; sleep 0.2; echo "ok 1 - t%s"\n' "$k" >"$d/rdma/t$k.sh"; done
chmod +x "$d"/rdma/*.sh
RROCE_CLAIMS=$d/claims RROCE_RESULTS=$d/res "$d/run.sh" t4 t5 t6 t7 t8 t9 >"$d/a.out" 2>&1 &
RROCE_CLAIMS=$d/claims RROCE_RESULTS=$d/res "$d/run.sh" t4 t5 t6 t7 t8 t9 >"$d/b.out" 2>&1
wait $!
check "run.sh claims: every script run once in all" \
	"$(cat "$d/a.out" "$d/b.out" | grep -E '^ok [0-9]+ selftests' | sed -E 's/.*rdma: (t[0-9]).*/\1/' | sort | tr '\n' ' ')" "t4 t5 t6 t7 t8 t9 "
na=$(grep -c '^ok ' "$d/a.out") nb=$(grep -c '^ok ' "$d/b.out")
check "run.sh claims: both ran some" "$([ "$na" -ge 1 ] && [ "$nb" -ge 1 ] && echo yes)" yes
check "run.sh claims: the counts add up" "$(tail -qn1 "$d/a.out" "$d/b.out" | awk '{p += $1} END {print p}')" 6
check "run.sh claims: each plan counts its own scripts" \
	"$(grep -h '^1\.\.' "$d/a.out" "$d/b.out" | sed 's/1\.\.//' | awk '{p += $1} END {print p}')" 6
if command -v strace >/dev/null; then
	execs=$(RROCE_RESULTS=$d/res strace -f -qq -e trace=execve -e signal=none "$d/run.sh" t3 2>&1 >/dev/null |
		grep 'execve(.* = 0$' | grep -v -e '/run.sh"' -e '/t3.sh"' -e '"timeout"' | sed -E 's/.*execve\("([^"]*)".*/\1/' | tr '\n' ' ')
	# (once per run: dirname, mkdir, getconf)
	check "run.sh: no program started per script but timeout and the script" "$execs" "/usr/bin/mkdir /usr/bin/getconf "
fi
rm -rf "$d"
# scripts/lib.sh's with_ticker leaves nothing behind that holds the
# caller's files: kernel.sh builds under a lock that module.sh then takes
# (a leftover `sleep 60` of the ticker made it wait up to a minute)
lk=$(mktemp)
(
	. "$RROCE_SELFTESTS/../scripts/lib.sh"
	exec 9>"$lk"
	flock 9
	_step_msg=x
	with_ticker sleep 0.5
)
t0=$(ms)
flock -w 10 "$lk" true
dt=$(($(ms) - t0))
check "with_ticker: the lock is free when the command is done" "$([ $dt -lt 1000 ] && echo yes || echo "no: $dt ms")" yes
rm -f "$lk"
echo "1..$n"
[ "$bad" = 0 ]
