#!/usr/bin/env bash
# Build rroce.ko against the cached kernel of a flavor.
#
#   scripts/module.sh [plain|debug]   -> prints build/<flavor>/rroce.ko
#
# Kbuild writes objects next to the sources, so each flavor builds in its own
# copy of the driver directory under build/ and the two never mix.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
flavor=${1:-plain}
kdir=$("$here/kernel.sh" "$flavor")
src=$RROCE_TOP/drivers/infiniband/sw/rroce
out=$RROCE_TOP/build/$flavor
mkdir -p "$out/rroce"
# Copy changed sources only, so Kbuild's timestamps stay meaningful.
(cd "$src" && find . -path ./proto/target -prune -o -type f \
	\( -name '*.rs' -o -name '*.c' -o -name '*.h' -o -name Kbuild \) -print) |
	while read -r f; do
		cmp -s "$src/$f" "$out/rroce/$f" || install -D -m 644 "$src/$f" "$out/rroce/$f"
	done
step "building rroce.ko ($flavor)"
log=$out/module-build.log
if ! make -s -C "$kdir" LLVM=1 M="$out/rroce" CONFIG_RDMA_RROCE=m modules >"$log" 2>&1; then
	cat "$log" >&2
	die "module build failed"
fi
# The build must be warning-free.
if grep -E 'warning|error' "$log" >&2; then
	die "module build produced warnings (see above)"
fi
# rustc has no -Wframe-larger-than: check the frames the way CONFIG_FRAME_WARN
# does for C.  Verbs can run deep inside ib_core (create_qp of the GSI QP
# runs under ib_register_device under netlink) on a 16 KiB stack.
frame_max=2048
big=$(objdump -d --no-show-raw-insn "$out/rroce/rroce.ko" | perl -ne '
	$f = $1 if /^[0-9a-f]+ <(.*)>:$/;
	print hex($1), " $f\n" if /sub\s+\$0x([0-9a-f]+),%rsp/ && hex($1) > '"$frame_max"';')
if [ -n "$big" ]; then
	echo "$big" >&2
	die "stack frames larger than $frame_max bytes in rroce.ko (see above)"
fi
# The kernel's own clippy lints (CLIPPY=1: undocumented_unsafe_blocks among
# them), in a copy of the tree: clippy-driver's code generation differs
# (objtool warns about it), so the module loaded is the plain build's.  Any
# clippy warning fails the build like a rustc warning.  RROCE_MODULE_CLIPPY=0
# skips it (make check lints the plain flavor only: the same sources).
lint_module() {
	local lint clog
	lint=$out/clippy
	mkdir -p "$lint"
	(cd "$out/rroce" && find . -path ./proto/target -prune -o -type f \( -name '*.rs' -o -name '*.c' -o -name '*.h' -o -name Kbuild \) -print) |
		while read -r f; do
			cmp -s "$out/rroce/$f" "$lint/$f" || install -D -m 644 "$out/rroce/$f" "$lint/$f"
		done
	clog=$out/module-clippy.log
	make -s -C "$kdir" LLVM=1 M="$lint" CONFIG_RDMA_RROCE=m CLIPPY=1 modules >"$clog" 2>&1 || {
		cat "$clog" >&2
		die "module build with CLIPPY=1 failed"
	}
	if grep -E '^(warning|error)' "$clog" >&2; then
		grep -A6 -E '^(warning|error)' "$clog" >&2
		die "the kernel's clippy lints warn (CLIPPY=1, see above)"
	fi
}
[ "${RROCE_MODULE_CLIPPY:-1}" = 0 ] || lint_module
cp "$out/rroce/rroce.ko" "$out/rroce.ko"
done_step
echo "$out/rroce.ko"
