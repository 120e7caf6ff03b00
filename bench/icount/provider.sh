#!/usr/bin/env bash
# Instructions per operation on the provider's fast path, old against new:
# deterministic (valgrind's callgrind counts instructions, not seconds), so
# a before/after needs no repeats and does not care what else the machine
# does.
#
#   bench/icount/provider.sh [BASE_REV] [N]
#
# BASE_REV (default bfed5c8: the provider before issue 17's layering) is
# built from `git archive` into build/icount/base, the working tree's
# provider into build/icount/head; both run bench/icount/post_poll.c
# against providers/rroce/tests/c/mock_uverbs.c (the same mock kernel for
# both) in a private mount namespace with a fake sysfs, as the provider's
# host tests do (needs root and no RDMA stack on the host).  Each mode runs
# with N and 2N iterations; the difference divided by N is the cost of one
# iteration, so setup and teardown cancel out.  Printed per mode: the
# instructions per iteration in the provider, in libibverbs, in the mock
# (its ring moves) and in all; and new/old.  Modes: send1 (post 1 inline
# 64 B SEND, poll 1), send16 (post a list of 16 WRITEs, poll 1), recv1
# (post 1 receive, poll 1).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
base_rev=${1:-bfed5c8}
n=${2:-2000}
out=$top/build/icount
command -v valgrind >/dev/null || { echo "valgrind missing (apt-get install valgrind)" >&2; exit 2; }
rm -rf "$out"
mkdir -p "$out/base-src" "$out/base" "$out/head"

echo "==> building the provider of $base_rev and of the working tree"
git -C "$top" archive "$base_rev" Cargo.toml Cargo.lock providers drivers/infiniband/sw/rroce/proto |
	tar -x -C "$out/base-src"
CARGO_TARGET_DIR=$out/target-base "$out/base-src/providers/rroce/build.sh" "$out/base" >/dev/null 2>"$out/build-base.log" ||
	{ cat "$out/build-base.log" >&2; exit 1; }
"$top/providers/rroce/build.sh" "$out/head" >/dev/null 2>"$out/build-head.log" ||
	{ cat "$out/build-head.log" >&2; exit 1; }
cc -O2 -shared -fPIC -o "$out/mock_uverbs.so" "$top/providers/rroce/tests/c/mock_uverbs.c" -ldl
cc -O2 -Wall -Wextra -o "$out/post_poll" "$here/post_poll.c" -libverbs -ldl

# The fake sysfs of providers/rroce/tests/load.rs: rroce0 is uverbs0.
sys=$out/sys
v=$sys/class/infiniband_verbs
mkdir -p "$v/uverbs0" "$sys/class/infiniband/rroce0"
echo 6 >"$v/abi_version"
echo rroce0 >"$v/uverbs0/ibdev"
echo 1:3 >"$v/uverbs0/dev"
echo 1 >"$v/uverbs0/abi_version"
echo "1: CA" >"$sys/class/infiniband/rroce0/node_type"
echo 0002:c903:0000:1230 >"$sys/class/infiniband/rroce0/node_guid"

# run WHICH MODE N: a callgrind profile in $out/WHICH.MODE.N.cg
run() {
	unshare -m sh -c '
		set -e
		mount -t tmpfs rroce-icount /dev
		mkdir /dev/infiniband
		mknod /dev/infiniband/uverbs0 c 1 3
		mknod /dev/null c 1 3
		exec "$@"' sh \
		env SYSFS_PATH="$sys" RDMAV_DRIVERS="$out/$1/librroce" IBV_DRIVERS= LD_PRELOAD="$out/mock_uverbs.so" \
		valgrind --tool=callgrind --callgrind-out-file="$out/$1.$2.$3.cg" "$out/post_poll" "$2" "$3" \
		>"$out/$1.$2.$3.log" 2>&1 ||
		{ echo "post_poll $2 $3 with the $1 provider failed:" >&2; cat "$out/$1.$2.$3.log" >&2; exit 1; }
	grep -q "^$2 $3 ok" "$out/$1.$2.$3.log" || { cat "$out/$1.$2.$3.log" >&2; exit 1; }
}

echo "==> callgrind: post_poll MODE $n and $((2 * n)), each provider"
for mode in send1 send16 recv1; do
	for which in base head; do
		run "$which" "$mode" "$n"
		run "$which" "$mode" $((2 * n))
	done
done
python3 "$here/report.py" "$out" "$n" "$base_rev" | tee "$out/report.txt"
