#!/usr/bin/env bash
# Fuzz the protocol core (drivers/infiniband/sw/rroce/proto) with cargo fuzz
# (libFuzzer), each target for FUZZ_SECONDS (default 60), one after the other.
#
#   scripts/fuzz.sh [TARGET...]      default: every target
#   FUZZ_SECONDS=600 scripts/fuzz.sh responder
#
# Runs on the stable toolchain: `--sanitizer none`.  AddressSanitizer (which
# needs nightly's -Zsanitizer) would add nothing here: rroce-proto is
# #![forbid(unsafe_code)], so out-of-bounds accesses are already panics.
# Coverage feedback (sancov) and debug assertions + overflow checks are on.
#
# Corpus: fuzz/seeds/TARGET and fuzz/regressions/TARGET (committed, read
# only) plus fuzz/corpus/TARGET (new inputs, not committed).  A crash leaves
# its input in fuzz/artifacts/TARGET/ and fails the run.  Prints one summary
# line per target and "fuzz: N passed, N failed" last.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
CARGO_FUZZ_VERSION=0.13.2
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
FUZZ_DIR=$RROCE_TOP/drivers/infiniband/sw/rroce/proto/fuzz
TARGETS=(packet responder requester wqe ring ud)
(($#)) && TARGETS=("$@")

# Install what is missing (idempotent): a C++ compiler for libFuzzer, and
# cargo-fuzz from crates.io.
if ! command -v c++ >/dev/null; then
	step "apt-get install g++"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq && apt-get install -y -qq --no-install-recommends g++ >/dev/null
	done_step
fi
if ! cargo fuzz --version 2>/dev/null | grep -q "$CARGO_FUZZ_VERSION"; then
	step "cargo install cargo-fuzz $CARGO_FUZZ_VERSION"
	cargo install --quiet --locked cargo-fuzz --version "$CARGO_FUZZ_VERSION" || die "cargo install cargo-fuzz"
	done_step
fi

cd "$FUZZ_DIR" || die "no $FUZZ_DIR"
FLAGS=(--sanitizer none --debug-assertions)
step "cargo fuzz build"
with_ticker cargo fuzz build "${FLAGS[@]}" || die "cargo fuzz build failed"
done_step

pass=0 fail=0
summary=()
for t in "${TARGETS[@]}"; do
	mkdir -p "corpus/$t" "artifacts/$t"
	dirs=("corpus/$t")
	for d in "seeds/$t" "regressions/$t"; do [ -d "$d" ] && dirs+=("$d"); done
	log=$(mktemp)
	step "fuzz $t for ${FUZZ_SECONDS}s"
	# One process, one job (shared machines); 2 GB RSS and 10 s per input.
	cargo fuzz run "${FLAGS[@]}" "$t" "${dirs[@]}" -- \
		-max_total_time="$FUZZ_SECONDS" -rss_limit_mb=2048 -timeout=10 \
		-print_final_stats=1 >"$log" 2>&1
	rc=$?
	done_step
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
	n=$(find "corpus/$t" -type f | wc -l)
	if [ "$rc" = 0 ]; then
		pass=$((pass + 1))
		summary+=("$(printf 'ok    %-10s %10s runs in %ss, cov %s, corpus %s' "$t" "${runs:-?}" "$FUZZ_SECONDS" "${cov:-?}" "$n")")
	else
		fail=$((fail + 1))
		grep -E 'panicked|SUMMARY|ERROR|Test unit written' "$log" | head -5 >&2
		art=$(sed -n 's/.*Test unit written to \(.*\)/\1/p' "$log" | head -1)
		summary+=("$(printf 'FAIL  %-10s exit %s, input %s' "$t" "$rc" "${art:-?}")")
		cp "$log" "artifacts/$t/last.log"
	fi
	rm -f "$log"
done
printf '%s\n' "${summary[@]}"
echo "fuzz: $pass passed, $fail failed"
[ "$fail" = 0 ]
