#!/usr/bin/env bash
# Host-side tests: cargo test of the workspace, a replay of the fuzz corpus
# through the fuzz harnesses (stable, no libFuzzer), formatting and clippy.
# Prints "host: N passed, N failed" last; exits non-zero on any failure.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
cd "$RROCE_TOP"
pass=0 fail=0
log=$(mktemp)
step "cargo test --workspace"
if cargo test --workspace --release 2>&1 | tee "$log"; then :; else fail=$((fail + 1)); fi
# Sum the per-binary "test result:" lines.
read -r p f < <(awk '/^test result:/ {for (i = 1; i <= NF; i++) {if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i}} END {print p+0, f+0}' "$log")
pass=$((pass + p)) fail=$((fail + f))
done_step
# The fuzz harnesses (their own workspace, see `make fuzz`) on stable without
# libFuzzer: replay the committed seeds and regression inputs.
fuzz=(--manifest-path drivers/infiniband/sw/rroce/proto/fuzz/Cargo.toml)
step "fuzz harnesses: replay seeds and regressions"
: >"$log"
if cargo test "${fuzz[@]}" --no-default-features --release 2>&1 | tee "$log"; then :; else fail=$((fail + 1)); fi
read -r p f < <(awk '/^test result:/ {for (i = 1; i <= NF; i++) {if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i}} END {print p+0, f+0}' "$log")
pass=$((pass + p)) fail=$((fail + f))
done_step
# The bench report's parsing and aggregation (failures never in a median).
step "bench/test_report.py"
if /usr/bin/python3 "$RROCE_TOP/bench/test_report.py"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "not ok: bench/test_report.py" >&2; fi
done_step
# Issue 17's rule as a ratchet: no new `unsafe` outside the (future)
# abstraction layer, no larger module import cycle.
step "layer check (unsafe outside ib/ net/ sync/ ffi, module cycles)"
if /usr/bin/python3 "$RROCE_TOP/scripts/layer_check.py"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "not ok: layer check" >&2; fi
done_step
step "selftests/test_lib.sh (shell helpers of the VM tests)"
if "$RROCE_TOP/selftests/test_lib.sh"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "not ok: selftests/test_lib.sh" >&2; fi
done_step
step "cargo fmt --check"
if cargo fmt --all -- --check && cargo fmt "${fuzz[@]}" -- --check; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "not ok: cargo fmt" >&2; fi
done_step
step "cargo clippy -D warnings"
if cargo clippy --workspace --all-targets --release -- -D warnings &&
	cargo clippy "${fuzz[@]}" --no-default-features --all-targets --release -- -D warnings; then
	pass=$((pass + 1))
else
	fail=$((fail + 1))
	echo "not ok: clippy" >&2
fi
done_step
rm -f "$log"
echo "host: $pass passed, $fail failed"
[ "$fail" = 0 ]
