#!/usr/bin/env bash
# Build the kernel-verbs test module (selftests/kmod) against the cached
# kernel of a flavor.
#
#   scripts/kmod.sh [plain|debug]   -> prints build/<flavor>/kmod/rroce_kverbs_test.ko
#
# Like scripts/module.sh, it builds in a copy of the sources under build/, one
# per flavor.  selftests/rdma/kverbs.sh loads the result ($RROCE_KVERBS_KO).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
flavor=${1:-plain}
kdir=$("$here/kernel.sh" "$flavor")
src=$RROCE_TOP/selftests/kmod
out=$RROCE_TOP/build/$flavor/kmod
mkdir -p "$out"
# Copy changed sources only, so Kbuild's timestamps stay meaningful.
for f in "$src"/*.c "$src"/Kbuild; do
	cmp -s "$f" "$out/${f##*/}" || install -m 644 "$f" "$out/${f##*/}"
done
step "building rroce_kverbs_test.ko ($flavor)"
log=$RROCE_TOP/build/$flavor/kmod-build.log
if ! make -s -C "$kdir" LLVM=1 M="$out" modules >"$log" 2>&1; then
	cat "$log" >&2
	die "kverbs test module build failed"
fi
# The build must be warning-free.
if grep -E 'warning|error' "$log" >&2; then
	die "kverbs test module build produced warnings (see above)"
fi
done_step
echo "$out/rroce_kverbs_test.ko"
