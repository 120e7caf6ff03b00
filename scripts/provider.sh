#!/usr/bin/env bash
# Build the libibverbs provider: build/lib/librroce-rdmav34.so.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
step "building librroce-rdmav34.so"
"$RROCE_TOP/providers/rroce/build.sh" "$RROCE_TOP/build/lib" >/dev/null
done_step
