#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
#
# Builds the libibverbs provider and installs it under the file name that
# rdma-core 44 looks for: <out>/librroce-rdmav34.so (default out: build/lib).
#
# Using it without installing into the system:
#   RDMAV_DRIVERS=/abs/path/build/lib/librroce ibv_devinfo -d rroce0
# (libibverbs appends "-rdmav34.so" to an absolute name), or
#   RDMAV_DRIVERS=rroce LD_LIBRARY_PATH=/abs/path/build/lib ibv_devinfo
# or a file /etc/libibverbs.d/<anything>.driver containing
#   driver /abs/path/build/lib/librroce
# System install: librroce-rdmav34.so into /usr/lib/<triplet>/libibverbs/ and
# providers/rroce/rroce.driver into /etc/libibverbs.d/.
set -eu

root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-"$root/build/lib"}
target=${CARGO_TARGET_DIR:-"$root/target"}

cd "$root"
cargo build --release -p rroce-provider
mkdir -p "$out"
install -m 0755 "$target/release/librroce.so" "$out/librroce-rdmav34.so"
echo "installed $out/librroce-rdmav34.so"
