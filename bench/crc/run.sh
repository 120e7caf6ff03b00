#!/usr/bin/env bash
# CRC-32 per KiB, table (the kernel's crc32_le) against the PCLMULQDQ
# folding loop (crc32-pclmul), on the host and in a plain-kernel TCG VM
# (crc32_cost.c says what exactly is timed).  Three runs each.
#   bench/crc/run.sh
set -e
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=$repo/build/crc32_cost
mkdir -p "$repo/build"
gcc -O2 -Wall -o "$out" "$here/crc32_cost.c"
echo "host (native):"
for _ in 1 2 3; do "$out"; done
echo "plain-kernel VM (TCG):"
"$repo/scripts/vm" --kernel plain bash -c "grep -m1 -o -w pclmulqdq /proc/cpuinfo || echo 'no pclmulqdq in the guest'; for _ in 1 2 3; do $out; done" |
	grep -E '^(per KiB|pclmulqdq|no pclmul)'
