# Shared helpers for rroce scripts (sourced, not run).
# shellcheck shell=bash
RROCE_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RROCE_CACHE=${RROCE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rroce}
export PATH="$HOME/.cargo/bin:$PATH"

_step_t0=0
_step_msg=
step() {
	_step_msg=$*
	_step_t0=$(date +%s)
	printf '==> %s\n' "$*" >&2
}
done_step() {
	printf '==> %s: done in %ss\n' "$_step_msg" $(($(date +%s) - _step_t0)) >&2
}
die() {
	printf 'error: %s\n' "$*" >&2
	exit 1
}

# Run a long command, printing the elapsed time every minute.  The ticker's
# `sleep` dies with it: left over, it would keep the caller's open files --
# kernel.sh's build lock among them -- for up to a minute after the command
# (module.sh waited that long for the lock after every kernel build).
with_ticker() {
	local t0=$SECONDS ticker
	(
		# $! is always this subshell's own sleep: the trap comes after the first
		sleep 60 &
		trap 'kill $! 2>/dev/null; exit 0' TERM
		while :; do
			wait $!
			printf '    ... %s: %dm%02ds\n' "$_step_msg" $(((SECONDS - t0) / 60)) $(((SECONDS - t0) % 60)) >&2
			sleep 60 &
		done
	) &
	ticker=$!
	local rc=0
	"$@" || rc=$?
	kill "$ticker" 2>/dev/null
	wait "$ticker" 2>/dev/null || true
	return $rc
}
