#!/usr/bin/env bash
# Build the libibverbs provider: build/lib/librroce-rdmav34.so.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
step "building librroce-rdmav34.so"
"$RROCE_TOP/providers/rroce/build.sh" "$RROCE_TOP/build/lib" >/dev/null
done_step
# The selftests' C programs (selftests/c, linked with libibverbs) are built
# here too when a compiler and the headers are there, so that the VM (where
# compiling takes minutes under TCG) finds them up to date; the tests build
# them themselves otherwise (selftests/lib.sh c_prog).
if command -v cc >/dev/null && [ -f /usr/include/infiniband/verbs.h ]; then
	step "building the selftests' C programs"
	for c in "$RROCE_TOP"/selftests/c/*.c; do
		# shellcheck source=../selftests/lib.sh
		bash -c '. "$1/selftests/lib.sh" && c_prog "$2"' _ "$RROCE_TOP" "$(basename "$c" .c)" >/dev/null ||
			die "cc failed for $c"
	done
	done_step
fi

