#!/usr/bin/env bash
# Install everything rroce needs to build and test, idempotently.
# Debian 12 host, run as root. Safe to re-run: does nothing when all is present.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"

DEBS=(linux-source-6.12 clang lld llvm libclang-dev flex bison bc libelf-dev
      libssl-dev qemu-system-x86 rdma-core ibverbs-utils ibverbs-providers
      libibverbs-dev librdmacm-dev perftest rdmacm-utils python3-pyverbs
      iproute2 tshark kmod cpio busybox-static xz-utils python3-matplotlib iperf3
      ethtool procps python3-pip binutils perl ucx-utils
      openmpi-bin libopenmpi-dev libfabric-bin valgrind nfs-kernel-server
      ksmbd-tools cifs-utils targetcli-fb open-iscsi srptools fio)
BINDGEN_VERSION=0.73.2
VNG_VERSION=1.42

# bindgen-cli compiles from crates.io for ~1.5 min and needs nothing apt
# installs (it loads libclang at run time), so it builds beside apt-get.
bindgen_pid= bindgen_log=
if ! command -v bindgen >/dev/null || ! bindgen --version | grep -q "$BINDGEN_VERSION"; then
	bindgen_log=$(mktemp)
	echo "==> cargo install bindgen-cli $BINDGEN_VERSION, beside the rest" >&2
	bindgen_t0=$(date +%s)
	cargo install --quiet --locked bindgen-cli --version "$BINDGEN_VERSION" >"$bindgen_log" 2>&1 &
	bindgen_pid=$!
fi

missing=()
for p in "${DEBS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
	step "apt-get install ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	done_step
fi

if ! rustup component list --installed 2>/dev/null | grep -q '^rust-src'; then
	step "rustup component add rust-src"
	rustup component add rust-src
	done_step
fi

# clippy: host-test's cargo clippy and the module's CLIPPY=1 build.
if ! rustup component list --installed 2>/dev/null | grep -q '^clippy'; then
	step "rustup component add clippy"
	rustup component add clippy
	done_step
fi

if ! command -v vng >/dev/null || ! vng --version 2>/dev/null | grep -q "$VNG_VERSION"; then
	step "pip install virtme-ng $VNG_VERSION"
	# Into whatever python3 is first on PATH (pyenv or Debian's; the latter
	# is "externally managed", hence the flag, harmless elsewhere).
	python3 -m pip install --quiet --break-system-packages "virtme-ng==$VNG_VERSION"
	done_step
fi

if [ -n "$bindgen_pid" ]; then
	rc=0
	wait "$bindgen_pid" || rc=$?
	cat "$bindgen_log" >&2
	rm -f "$bindgen_log"
	[ $rc = 0 ] || die "cargo install bindgen-cli $BINDGEN_VERSION failed"
	echo "==> cargo install bindgen-cli $BINDGEN_VERSION: done in $(($(date +%s) - bindgen_t0))s" >&2
fi
