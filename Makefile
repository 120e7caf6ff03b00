# SPDX-License-Identifier: GPL-2.0
# rroce — a software RoCEv2 RDMA device in Rust.
#
#   make run      build what is needed, boot a VM, show rroce at work
#   make check    install what is missing, build, run host tests, the VM
#                 selftests on the plain kernel, then the robustness tests
#                 on the debug kernel (built in the background; bounded by
#                 the CI budget); ends with "N passed, N failed"
#   make bench    perftest: rroce vs rdma_rxe vs TCP (QUICK=1: a short run;
#                 BASE=rev: also rroce of commit rev, interleaved: before/after)
#   make bench-provider   instructions per post/poll of the provider, old
#                 (BASE=rev, default bfed5c8) against the working tree,
#                 under callgrind (deterministic; bench/icount/provider.sh)
#   make bench-kernel   guest instructions per message of the kernel data
#                 path under QEMU -icount, rroce0 -> rroce1 over veth
#                 (deterministic; BASE=rev: new/old; bench/icount/kernel.sh)
#   make bench-nvmeof   NVMe-oF (nvme-rdma, fio) between two VMs, rroce vs
#                 rdma_rxe (ROUNDS=3; BASE=rev; bench/nvmeof/run.sh)
#   make check-debug   the whole suite on the debug kernel (KASAN, lockdep,
#                 ...; several times slower: hours)
#   make fuzz     cargo fuzz every protocol-core target for FUZZ_SECONDS
#                 (default 60) each; a crash fails it
#
# Other targets: deps, kernel, module, provider, host-test, lint, vm, clean.
# FLAVOR=plain|debug picks the kernel for `module`/`vm` (default plain).

ifneq ($(KERNELRELEASE),)
# Invoked by Kbuild for `make -C $KDIR M=$PWD`.
include $(src)/Kbuild
else

SHELL := /bin/bash
FLAVOR ?= plain
TOP := $(CURDIR)
BUILD := $(TOP)/build
export PATH := $(HOME)/.cargo/bin:$(PATH)

.PHONY: bench bench-provider bench-kernel bench-nvmeof all deps kernel module provider host-test lint vm run check check-debug fuzz clean

all: module provider

deps:
	@scripts/deps.sh

kernel: deps
	@scripts/kernel.sh $(FLAVOR) >/dev/null

module: kernel
	@scripts/module.sh $(FLAVOR)
	@scripts/kmod.sh $(FLAVOR)

provider: deps
	@scripts/provider.sh

host-test: deps
	@scripts/host-test.sh

lint: deps
	cargo fmt --all -- --check
	cargo clippy --workspace --all-targets -- -D warnings
	cargo fmt --manifest-path drivers/infiniband/sw/rroce/proto/fuzz/Cargo.toml -- --check
	cargo clippy --manifest-path drivers/infiniband/sw/rroce/proto/fuzz/Cargo.toml --no-default-features --all-targets -- -D warnings

vm: module provider
	@RROCE_KO=$(BUILD)/$(FLAVOR)/rroce.ko scripts/vm --kernel $(FLAVOR)

run: deps
	@$(MAKE) --no-print-directory FLAVOR=plain module provider
	@RROCE_KO=$(BUILD)/plain/rroce.ko scripts/vm --kernel plain scripts/demo.sh

# Benchmark (bench/run.sh): perftest on rroce and rdma_rxe, interleaved, and
# iperf3 TCP.  `make bench`: loopback in one VM and two VMs joined by
# virtio-net, all metrics (about an hour); `make bench QUICK=1`: loopback, a
# few metrics (about 5 minutes); BASE=rev adds rroce.ko and the provider of
# commit rev as a third driver (bench/base.sh).  Prints a table, writes
# bench/results/DATE.json and DATE.png.
bench: deps
	@$(MAKE) --no-print-directory FLAVOR=plain module provider
	@RROCE_KO=$(BUILD)/plain/rroce.ko bench/run.sh $(if $(filter 1 y yes true,$(QUICK)),--quick) $(if $(BASE),--base $(BASE))

bench-provider: deps
	@bench/icount/provider.sh $(BASE)

# The kernel data path in guest instructions per message (QEMU -icount:
# deterministic; BASE=rev: also the module of commit rev, new/old).
bench-kernel: deps
	@$(MAKE) --no-print-directory FLAVOR=plain module provider
	@RROCE_KO=$(BUILD)/plain/rroce.ko bench/icount/kernel.sh $(BASE)

# NVMe over Fabrics (RDMA) between two VMs, rroce vs rdma_rxe: fio IOPS at
# queue depths 1 and 16 (ROUNDS=3; BASE=rev adds rroce.ko of commit rev).
bench-nvmeof: deps
	@$(MAKE) --no-print-directory FLAVOR=plain module
	@RROCE_KO=$(BUILD)/plain/rroce.ko bench/nvmeof/run.sh --rounds $(or $(ROUNDS),3) $(if $(BASE),--base $(BASE))

check: deps
	@scripts/check.sh plain

# Fuzzing (scripts/fuzz.sh): installs cargo-fuzz if missing, stable rustc.
# FUZZ_SECONDS=N per target; TARGETS="packet ud" for a subset.
fuzz:
	@FUZZ_SECONDS=$(or $(FUZZ_SECONDS),60) scripts/fuzz.sh $(TARGETS)

check-debug: deps
	@scripts/check.sh debug

clean:
	rm -rf $(BUILD) target
endif
