#!/usr/bin/env bash
# Build (or reuse) the rroce test kernel.
#
#   scripts/kernel.sh [plain|debug]      build that flavor, print its build dir
#
# The source tree is Debian's linux-source-6.12, unpacked once into the cache
# (~/.cache/rroce by default, $RROCE_CACHE to override) with our bindings patch
# applied.  Each flavor has its own O= build dir next to it.  A stamp with the
# hash of everything that shapes the build (kernel version, config fragments,
# bindings patch, rustc/bindgen/clang versions) decides whether to re-run the
# configuration; `make` itself then rebuilds only what changed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

flavor=${1:-plain}
case $flavor in plain|debug) ;; *) die "flavor must be plain or debug" ;; esac

tarball=/usr/src/linux-source-6.12.tar.xz
[ -f "$tarball" ] || die "$tarball missing: run scripts/deps.sh"
kver=$(dpkg-query -W -f='${Version}' linux-source-6.12)
patch=$here/kernel/0001-rust-bindings-add-RDMA-and-networking-headers.patch
frags=("$here/kernel/rroce.config")
case $flavor in
plain) frags+=("$here/kernel/consumers.config") ;;
debug) frags+=("$here/kernel/debug.config") ;;
esac

mkdir -p "$RROCE_CACHE"
# Several checkouts (worktrees, a CI clone) may share the cache: one process
# at a time unpacks/patches the source, and one at a time builds a flavor;
# the others wait and then reuse the result.
exec 8>"$RROCE_CACHE/.lock-source" 9>"$RROCE_CACHE/.lock-$flavor"
flock 9
flock 8
src=$RROCE_CACHE/linux-$kver
if [ ! -f "$src/.rroce-unpacked" ]; then
	step "unpacking linux-source $kver"
	rm -rf "$src" "$src.tmp"
	mkdir -p "$src.tmp"
	tar -C "$src.tmp" --strip-components=1 -xJf "$tarball"
	cp "$src.tmp/rust/bindings/bindings_helper.h" "$src.tmp/rust/bindings/bindings_helper.h.orig"
	touch "$src.tmp/.rroce-unpacked"
	mv "$src.tmp" "$src"
	done_step
fi

# (Re-)apply the bindings patch onto the pristine header when it changed.
phash=$(sha256sum "$patch" | cut -c1-16)
if [ "$(cat "$src/.rroce-patch" 2>/dev/null)" != "$phash" ]; then
	step "applying bindings patch"
	cp "$src/rust/bindings/bindings_helper.h.orig" "$src/rust/bindings/bindings_helper.h"
	patch -s -d "$src" -p1 <"$patch"
	echo "$phash" >"$src/.rroce-patch"
	done_step
fi

flock -u 8

out=$RROCE_CACHE/build-$flavor
mkdir -p "$out"
hash=$( { echo "$kver"; cat "${frags[@]}" "$patch"; rustc --version; bindgen --version; clang --version | head -1; } | sha256sum | cut -c1-16)
mk=(make -s -C "$src" O="$out" LLVM=1 -j"$(nproc)")

if [ "$(cat "$out/.rroce-config" 2>/dev/null)" != "$hash" ]; then
	step "configuring $flavor kernel"
	# allnoconfig with the fragments forced on top: nothing else is built.
	cat "${frags[@]}" >"$out/.rroce-allconfig"
	"${mk[@]}" KCONFIG_ALLCONFIG="$out/.rroce-allconfig" allnoconfig >/dev/null
	# Every option the fragments ask for must have landed.
	bad=0
	while IFS= read -r line; do
		case $line in
		CONFIG_*=*) want=$line ;;
		"# CONFIG_"*" is not set") want=$line ;;
		*) continue ;;
		esac
		opt=${want#\# }; opt=${opt%%[= ]*}
		got=$(grep -E "^(# )?$opt[= ]" "$out/.config" || echo "# $opt is not set")
		if [ "$got" != "$want" ]; then
			echo "config: wanted '$want', got '$got'" >&2
			bad=1
		fi
	done <"$out/.rroce-allconfig"
	[ $bad = 0 ] || die "kernel config fragment did not apply"
	echo "$hash" >"$out/.rroce-config"
	done_step
fi

# Nothing in the kernel tree changes behind our back, so a completed build
# with the same inputs is reused as is.
if [ "$(cat "$out/.rroce-built" 2>/dev/null)" != "$hash" ]; then
	step "building $flavor kernel (incremental; a fresh build takes several minutes)"
	with_ticker "${mk[@]}" bzImage modules
	# virtme-ng wants the modules laid out like an installed tree.
	rm -rf "$out/.mods"
	"${mk[@]}" INSTALL_MOD_PATH="$out/.mods" INSTALL_MOD_STRIP=1 modules_install >/dev/null
	echo "$hash" >"$out/.rroce-built"
	done_step
fi
echo "$out"
