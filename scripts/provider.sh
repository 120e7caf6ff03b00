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
		# Programs that include mpi.h are built with mpicc (when Open MPI
		# is installed), the others with cc and -libverbs.
		how=c_prog
		if grep -q '^#include <mpi.h>' "$c"; then
			command -v mpicc >/dev/null || continue
			how=mpi_prog
		fi
		# shellcheck source=../selftests/lib.sh
		bash -c '. "$1/selftests/lib.sh" && "$3" "$2"' _ "$RROCE_TOP" "$(basename "$c" .c)" "$how" >/dev/null ||
			die "$how failed for $c"
	done
	done_step
fi

