#!/usr/bin/env bash
# Builds the "before" of a before/after benchmark: rroce.ko and the provider
# of an older commit, so that `make bench BASE=REV` can run them in the same
# VM, interleaved with the working tree's (bench/run.sh --base REV).
#
#   bench/base.sh REV    -> build/bench-base/{rroce.ko,librroce-rdmav34.so}
#
# The module is built against the same cached plain kernel as the working
# tree's (scripts/kernel.sh plain prints its directory; it is never rebuilt
# from REV's scripts, which could rebuild the kernel under a running VM), from
# REV's driver directory taken with `git archive`; the provider with REV's
# providers/rroce/build.sh and its own cargo target directory.  Prints
# "REV_DESCRIPTION" (git describe of REV) on its last line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../scripts/lib.sh"
top=$RROCE_TOP
rev=${1:?usage: bench/base.sh REV}
desc=$(git -C "$top" rev-parse --short "$rev^{commit}") || die "no commit $rev"
out=$top/build/bench-base
kdir=$("$top/scripts/kernel.sh" plain)

# Rebuild only when REV changed (the kernel is keyed by its own inputs).
if [ "$(cat "$out/rev" 2>/dev/null)" = "$desc" ] && [ -f "$out/rroce.ko" ] &&
	[ -f "$out/librroce-rdmav34.so" ]; then
	echo "$desc"
	exit 0
fi
rm -rf "$out"
mkdir -p "$out/src"
git -C "$top" archive "$desc" Cargo.toml Cargo.lock providers drivers/infiniband/sw/rroce |
	tar -x -C "$out/src"

step "bench: building rroce.ko of $desc"
make -s -C "$kdir" LLVM=1 M="$out/src/drivers/infiniband/sw/rroce" CONFIG_RDMA_RROCE=m modules \
	>"$out/module-build.log" 2>&1 || { cat "$out/module-build.log" >&2; die "module of $desc: build failed"; }
cp "$out/src/drivers/infiniband/sw/rroce/rroce.ko" "$out/rroce.ko"
done_step

step "bench: building the provider of $desc"
CARGO_TARGET_DIR=$out/target "$out/src/providers/rroce/build.sh" "$out" >"$out/provider-build.log" 2>&1 ||
	{ cat "$out/provider-build.log" >&2; die "provider of $desc: build failed"; }
done_step
echo "$desc" >"$out/rev"
echo "$desc"
