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
echo "1..$n"
[ "$bad" = 0 ]
