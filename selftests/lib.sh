# Shared helpers for the rroce selftests (sourced by every test and by
# scripts/vm-init.sh).  Runs as root, normally inside the scripts/vm guest.
# shellcheck shell=bash
#
# Driver under test: $RROCE_TYPE, "rroce" (default) or "rxe" (the in-kernel C
# soft-RoCE driver, used to validate the tests themselves).
#
# Standard topology (made by scripts/vm-init.sh, restored by topo_reset):
#   rr0  init_net      10.77.0.1/24 fd77::1/64   <- $DEV0 (rroce0 / rxe0)
#   rr1  netns "peer"  10.77.0.2/24 fd77::2/64   <- $DEV1 (rroce1 / rxe1)
#   eth0 init_net      10.78.0.1/24  (virtio-net on a QEMU hub, if present)
#   eth1 netns "peer2" 10.78.0.2/24

_lib=${BASH_SOURCE[0]}
[[ $_lib == */* ]] || _lib=./$_lib
RROCE_SELFTESTS=$(cd "${_lib%/*}" && pwd)
RROCE_REPO=${RROCE_REPO:-$(cd "$RROCE_SELFTESTS/.." && pwd)}
RROCE_TYPE=${RROCE_TYPE:-rroce}
RROCE_KO=${RROCE_KO:-$RROCE_REPO/build/${RROCE_KERNEL_FLAVOR:-plain}/rroce.ko}
RROCE_PROVIDER=${RROCE_PROVIDER:-$RROCE_REPO/build/lib/librroce-rdmav34.so}
# kernel-verbs test module (scripts/kmod.sh), loaded by rdma/kverbs.sh
RROCE_KVERBS_KO=${RROCE_KVERBS_KO:-$RROCE_REPO/build/${RROCE_KERNEL_FLAVOR:-plain}/kmod/rroce_kverbs_test.ko}
export RROCE_REPO RROCE_TYPE RROCE_KO RROCE_PROVIDER RROCE_KVERBS_KO

KSFT_PASS=0
KSFT_FAIL=1
KSFT_SKIP=4

NS1=peer
NS2=peer2
IF0=rr0
IF1=rr1
IP0=10.77.0.1
IP1=10.77.0.2
IP6_0=fd77::1
IP6_1=fd77::2
ROCE_PORT=4791

case $RROCE_TYPE in
rroce)
	DEV0=rroce0 DEV1=rroce1 MOD=rroce
	# libibverbs config file that makes the provider known
	DRIVER_FILE=rroce.driver
	# IB MTU rule: include/rdma/ib_addr.h iboe_get_mtu(): netdev MTU minus
	# GRH 40 + UDP 8 + BTH 12 + XRC 4 + AtomicETH 28 + ICRC 4 = 96.
	MTU_OVERHEAD=96
	;;
rxe)
	DEV0=rxe0 DEV1=rxe1 MOD=rdma_rxe
	DRIVER_FILE=rxe.driver
	# rxe_param.h eth_mtu_int_to_enum(): minus RXE_MAX_HDR_LENGTH (80),
	# never below 256.
	MTU_OVERHEAD=80
	;;
*)
	echo "RROCE_TYPE must be rroce or rxe, not '$RROCE_TYPE'" >&2
	return 1 2>/dev/null || exit 1
	;;
esac
SYS_IB=/sys/class/infiniband

# roce_mtu NETDEV_MTU: the active (path) MTU in bytes, 256..4096, of this
# driver's device on a netdev of MTU NETDEV_MTU: the largest that fits with
# MTU_OVERHEAD bytes of headers, at least 256.
roce_mtu() {
	local m=$(($1 - MTU_OVERHEAD)) ib
	for ib in 4096 2048 1024 512 256; do
		[ "$m" -ge "$ib" ] && break
	done
	echo "$ib"
}

# ---------------------------------------------------------------- TAP output
_t_num=0 _t_plan=0 _t_fail=0 _t_pass=0 _t_skip=0 _t_desc= _t_err=0
_t=${0##*/}
TEST_NAME=${TEST_NAME:-${_t%.sh}}

diag() { printf '# %s\n' "$*"; }

ktap_header() { echo "TAP version 13"; }
ktap_plan() { _t_plan=$1; echo "1..$1"; }

# Each result is followed by "# took Ns": the time since the previous one
# (or the script's start), so that a log shows where a script's time goes.
_t_clock=$SECONDS
_t_took() { echo "# took $((SECONDS - _t_clock))s"; _t_clock=$SECONDS; }
ktap_pass() { _t_num=$((_t_num + 1)); _t_pass=$((_t_pass + 1)); echo "ok $_t_num - $*"; _t_took; }
ktap_fail() { _t_num=$((_t_num + 1)); _t_fail=$((_t_fail + 1)); echo "not ok $_t_num - $*"; _t_took; }
# ktap_skip DESC REASON
ktap_skip() { _t_num=$((_t_num + 1)); _t_skip=$((_t_skip + 1)); echo "ok $_t_num - $1 # SKIP $2"; _t_took; }

# Subtests made of several assertions:
#   t_begin "desc"; expect_eq ...; assert ...; t_end
# Every failed assertion prints a diagnostic; t_end prints ok/not ok.
t_begin() { _t_desc=$*; _t_err=0; }
t_fail() { diag "FAIL: $*"; _t_err=1; }
t_end() {
	if [ "$_t_err" = 0 ]; then ktap_pass "$_t_desc"; else ktap_fail "$_t_desc"; fi
	_t_desc=
}
# t_skip REASON: end the current subtest as skipped
t_skip() { ktap_skip "$_t_desc" "$*"; _t_desc=; }

# expect_eq WHAT GOT WANT
expect_eq() {
	if [ "$2" != "$3" ]; then
		t_fail "$1: got '$2', want '$3'"
		return 1
	fi
}
# expect_ok WHAT CMD...: CMD must succeed
expect_ok() {
	local what=$1 out rc
	shift
	out=$("$@" 2>&1) && return 0
	rc=$?
	t_fail "$what: '$*' exited $rc: $(printf '%s' "$out" | head -5 | tr '\n' ' ')"
	return 1
}
# expect_fail WHAT CMD...: CMD must fail (non-zero exit)
expect_fail() {
	local what=$1 out
	shift
	if out=$("$@" 2>&1); then
		t_fail "$what: '$*' succeeded but should have failed"
		return 1
	fi
	diag "$what: failed as expected: $(printf '%s' "$out" | head -2 | tr '\n' ' ')"
}
# expect_wait WHAT TIMEOUT CMD...: CMD must become true within TIMEOUT s
expect_wait() {
	local what=$1 tmo=$2
	shift 2
	wait_for "$tmo" "$@" && return 0
	t_fail "$what: not true after ${tmo}s: $*"
	return 1
}

# Exit with the kselftest code for what was printed.
ktap_finished() {
	if [ "$_t_num" != "$_t_plan" ]; then
		diag "planned $_t_plan tests but ran $_t_num"
		exit $KSFT_FAIL
	fi
	[ "$_t_fail" = 0 ] || exit $KSFT_FAIL
	[ "$_t_pass" = 0 ] && [ "$_t_skip" -gt 0 ] && exit $KSFT_SKIP
	exit $KSFT_PASS
}

# Skip the whole test (prints the plan with all results skipped).
ktap_skip_all() {
	local reason=$*
	while [ "$_t_num" -lt "$_t_plan" ]; do ktap_skip "$TEST_NAME" "$reason"; done
	[ "$_t_plan" = 0 ] && echo "1..0 # SKIP $reason"
	exit $KSFT_SKIP
}

# ------------------------------------------------------------------- waiting
# nap SECONDS: sleep without starting a process (sleep(1) and date(1) cost
# a fork and an exec each, ~0.1 s of CPU on the debug kernel under TCG,
# which a polling loop pays several times a second): a read with a timeout
# on a pipe nothing is written to.
_nap_fd=
nap() {
	if [ -z "$_nap_fd" ] && ! exec {_nap_fd}<> <(:); then
		_nap_fd=
		sleep "$1" # no such pipe here: never spin
		return 0
	fi
	read -rt "$1" -u "$_nap_fd" _ || :
}

# wait_for TIMEOUT CMD...: poll CMD until it succeeds; false on timeout.
# TIMEOUT is in seconds (integer); scaled by $RROCE_TIMEOUT_SCALE.  The
# pauses grow from 0.05 s to 0.5 s (after ~2 s), so a long wait does not
# keep the guest busy starting CMD while it waits for other work.
wait_for() {
	local tmo=$(($1 * ${RROCE_TIMEOUT_SCALE:-1})) end ms=50 t s
	shift
	t=${EPOCHREALTIME/[.,]/}
	end=$((t / 1000 + tmo * 1000))
	while :; do
		"$@" >/dev/null 2>&1 && return 0
		t=${EPOCHREALTIME/[.,]/}
		[ $((t / 1000)) -lt "$end" ] || return 1
		printf -v s '0.%03d' $ms
		nap "$s"
		[ $ms -lt 500 ] && ms=$((ms * 3 / 2))
		[ $ms -gt 500 ] && ms=500
	done
}
not() { ! "$@"; }

# has_line FILE REGEX: FILE has a line matching the extended regular
# expression REGEX.  Bash alone: it stands for `grep -qE` in polling loops
# (each grep costs ~0.3 s on the debug kernel under TCG).
has_line() {
	local l
	[ -r "$1" ] || return 1
	while IFS= read -r l || [ -n "$l" ]; do
		[[ $l =~ $2 ]] && return 0
	done <"$1"
	return 1
}

# bg_logged FILE CMD...: run CMD in the background, stdout and stderr to
# FILE, which is empty when this returns ($! is CMD's pid).  For a FILE
# polled with has_line and used before: the background shell truncates it
# only once it runs, so a poll right after `CMD >FILE &` can still read
# the last run's lines (disassociate.sh's wait for "ready" did, on a
# loaded host, and removed the device before the process had opened it).
bg_logged() {
	local f=$1
	shift
	: >"$f"
	"$@" >>"$f" 2>&1 &
}

# --------------------------------------------------------------- dmesg check
_dmesg_marker=

# Mark the kernel log so check_dmesg looks only at what came after.
dmesg_mark() {
	_dmesg_marker="rroce-selftest: begin $TEST_NAME $$.$RANDOM"
	echo "$_dmesg_marker" >/dev/kmsg 2>/dev/null || _dmesg_marker=
	# kmemleak: forget what was suspected before this test
	if [ -w /sys/kernel/debug/kmemleak ] && [ "${RROCE_KMEMLEAK:-1}" != 0 ]; then
		echo clear >/sys/kernel/debug/kmemleak 2>/dev/null || true
	fi
}

# Kernel log since dmesg_mark.
dmesg_since_mark() {
	if [ -n "$_dmesg_marker" ]; then
		dmesg | awk -v m="$_dmesg_marker" 'index($0, m) { buf = ""; seen = 1; next } seen { buf = buf $0 "\n" } END { printf "%s", buf }'
	else
		dmesg
	fi
}

# Patterns of kernel reports that make a test fail.
DMESG_BAD='BUG:|WARNING:|Oops|kernel BUG|general protection fault|KASAN|UBSAN:|possible circular locking|possible recursive locking|inconsistent lock state|suspicious RCU usage|lock held when returning|rust_panic|panicked at|Kernel panic|unreferenced object|new suspected memory leaks|list_add corruption|list_del corruption|refcount_t:|BUG kmalloc|Call Trace:'
# ... and those of the stall detectors (the debug kernel has them, with the
# thresholds scripts/vm lowers; the texts are 6.12's):
#   soft lockup  "watchdog: BUG: soft lockup - CPU#1 stuck for 7s! [cmd:123]"
#   hard lockup  "Watchdog detected hard LOCKUP on cpu 1"
#   RCU stall    "rcu: INFO: rcu_preempt self-detected stall on CPU",
#                "rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:",
#                "rcu: INFO: rcu_preempt detected expedited stalls on CPUs/tasks: {",
#                "INFO: rcu_tasks detected stalls on tasks:" (rcu_sched
#                instead of rcu_preempt without CONFIG_PREEMPT_RCU)
#   hung task    "INFO: task cmd:123 blocked for more than 30 seconds." and
#                its '"echo 0 > /proc/sys/kernel/hung_task_timeout_secs"'
DMESG_BAD+='|soft lockup|hard LOCKUP|rcu_[a-z_]+ (self-)?detected (expedited )?stall|INFO: task .* blocked|blocked for more than [0-9]+ seconds|hung_task_timeout_secs|hung_task: blocked'

# Optionally scan for kmemleak leaks (debug kernel).  Prints suspected leaks.
# Status 2 when kmemleak is there but refuses to scan: it turned itself off
# (its object pool ran out, say; "kmemleak: Kernel memory leak detector
# disabled" in dmesg), so no leak would be found any more.
kmemleak_scan() {
	local f=/sys/kernel/debug/kmemleak
	[ -w "$f" ] && [ "${RROCE_KMEMLEAK:-1}" != 0 ] || return 0
	# A suspect must still be unreferenced in a second scan (the file
	# lists only what the last scan found unreferenced): the second scan
	# runs only when the first found something.  A scan of the debug VM
	# takes ~20 s under TCG, and every robustness script ends with one.
	echo scan >"$f" 2>/dev/null || return 2
	if [ -n "$(head -c1 "$f" 2>/dev/null)" ]; then
		echo scan >"$f" 2>/dev/null || return 2
	fi
	cat "$f" 2>/dev/null
	echo clear >"$f" 2>/dev/null || true
}

# kernel_checks_off: why the kernel's checkers could not have reported
# anything during this test, or nothing.  One report disables them for
# the rest of the boot: KASAN (generic, without kasan_multi_shot) reports
# only the first bad access of a boot, and its report taints the kernel B
# (TAINT_BAD_PAGE, as slab corruption and bad page state reports do) with
# LOCKDEP_NOW_UNRELIABLE, which turns lockdep off; a lockdep report turns
# lockdep off too.  Such a report at boot (before any test's dmesg mark)
# or in an earlier test would leave every later test passing unchecked on
# the debug kernel: check_dmesg fails them instead, and names the report.
kernel_checks_off() {
	local t=0 why= first k v
	read -r t </proc/sys/kernel/tainted 2>/dev/null
	if [ $((t >> 5 & 1)) = 1 ]; then
		why="the kernel is tainted B (a KASAN, slab or bad-page report earlier in this boot): KASAN reports only the first bad access of a boot, so this test ran without it; "
	fi
	if [ -r /proc/lockdep_stats ]; then
		while read -r k v; do
			[ "$k" = debug_locks: ] && break
		done </proc/lockdep_stats
	fi
	if [ "${k:-}" = debug_locks: ] && [ "$v" = 0 ]; then
		why+="lockdep is off (debug_locks 0 in /proc/lockdep_stats: a report earlier in this boot turned it off), so this test's locking went unchecked; "
	fi
	[ -n "$why" ] || return 0
	first=$(dmesg | grep -m1 -E "$DMESG_BAD")
	echo "${why}first report of this boot: ${first:-(no longer in the kernel log)}"
}

# check_dmesg: a subtest that fails if the kernel complained since the test
# started (KASAN, lockdep, WARN, BUG, Oops, Rust panics, UBSAN, kmemleak,
# stall detectors), or if an earlier report had switched the checkers off.
check_dmesg() {
	local log leaks off
	t_begin "no kernel warnings, splats or leaks in dmesg"
	leaks=$(kmemleak_scan) || t_fail "kmemleak refuses to scan (it turned itself off: 'kmemleak:' lines in dmesg); no leak check"
	log=$(dmesg_since_mark)
	# (one line at a time, as grep matches: ".*" must not span lines)
	if [[ $log =~ ${DMESG_BAD//.\*/[^$'\n']*} ]]; then
		# The context first, then the report lines themselves last, next
		# to the verdict (a log cut at its top still shows what it was).
		printf '%s\n' "$log" | grep -En -A30 "$DMESG_BAD" | head -50 | sed 's/^/#   /'
		printf '%s\n' "$log" | grep -En "$DMESG_BAD" | head -8 | sed 's/^/#   report: /'
		t_fail "kernel log has a report: $(printf '%s\n' "$log" | grep -Em1 "$DMESG_BAD" | cut -c1-160)"
	fi
	if [ -n "$leaks" ]; then
		t_fail "kmemleak suspects leaks:"
		printf '%s\n' "$leaks" | head -60 | sed 's/^/#   /'
	fi
	off=$(kernel_checks_off)
	[ -z "$off" ] || t_fail "kernel checks were off: $off"
	t_end
}

# ------------------------------------------------------------------ topology
ns() { local n=$1; shift; ip netns exec "$n" "$@"; }
# ns_bg NETNS CMD...: CMD in the background in NETNS; $! is CMD's own
# process (ip netns exec execs it), so `kill $!` reaches it.  (`ns ... &`
# backgrounds a subshell running the function: killing that subshell
# leaves the command running, orphaned, until its own timeout.)
ns_bg() { local n=$1; shift; ip netns exec "$n" "$@" & }

# Make the standard veth topology from scratch (idempotent).
topo_setup() {
	ip link del "$IF0" 2>/dev/null
	ip netns del "$NS1" 2>/dev/null
	ip netns add "$NS1" || return 1
	ip link add "$IF0" type veth peer name "$IF1" netns "$NS1" || return 1
	ip addr add "$IP0/24" dev "$IF0" || return 1
	ip addr add "$IP6_0/64" dev "$IF0" nodad || return 1
	ns "$NS1" ip addr add "$IP1/24" dev "$IF1" || return 1
	ns "$NS1" ip addr add "$IP6_1/64" dev "$IF1" nodad || return 1
	ip link set "$IF0" up || return 1
	ns "$NS1" ip link set lo up || return 1
	ns "$NS1" ip link set "$IF1" up || return 1
}

# The virtio NICs of `scripts/vm` (QEMU hub): eth0 stays in init_net with
# 10.78.0.1/24, eth1 moves to netns peer2 with 10.78.0.2/24.
virtio_nics() {
	local n
	for n in /sys/class/net/*; do
		[ "$(basename "$(readlink -f "$n/device/driver" 2>/dev/null)")" = virtio_net ] || continue
		echo "$(basename "$(readlink -f "$n/device/..")") ${n##*/}"
	done | sort | awk '{ print $2 }'
}
nics_setup() {
	# udev in the guest may have named them enpXsY: call them eth0/eth1
	local i=0 n
	for n in $(virtio_nics); do
		if [ "$n" != "eth$i" ] && ! ip link show "eth$i" >/dev/null 2>&1; then
			ip link set "$n" down 2>/dev/null
			ip link set "$n" name "eth$i" || return 1
		fi
		i=$((i + 1))
		[ $i = 2 ] && break
	done
	if ip link show eth0 >/dev/null 2>&1 && ip link show eth1 >/dev/null 2>&1; then
		ip netns del "$NS2" 2>/dev/null
		ip netns add "$NS2" || return 1
		ip link set eth1 netns "$NS2" || return 1
		ip addr flush dev eth0
		ip addr add 10.78.0.1/24 dev eth0 || return 1
		ip link set eth0 up || return 1
		ns "$NS2" ip link set lo up
		ns "$NS2" ip addr add 10.78.0.2/24 dev eth1 || return 1
		ns "$NS2" ip link set eth1 up || return 1
	fi
}

# --------------------------------------------------------------- the driver
drv_loaded() { [ -d "/sys/module/$MOD" ]; }

# drv_load [PARAM=VALUE...]: load the driver under test (rroce: with
# RROCE_KO_ARGS, then PARAMs); false (with a message) if it cannot be.
drv_load() {
	drv_loaded && return 0
	case $RROCE_TYPE in
	rroce)
		[ -f "$RROCE_KO" ] || { echo "rroce.ko not built ($RROCE_KO)" >&2; return 1; }
		# rxe binds UDP 4791 in init_net; it must not be around
		[ -d /sys/module/rdma_rxe ] && rmmod rdma_rxe
		# RROCE_KO_ARGS: module parameters (icrc=table, say), word-split.
		# With icrc=crypto, crc32-pclmul first where the CPU has PCLMULQDQ
		# (scripts/vm keeps udev from loading it at boot).
		case " ${RROCE_KO_ARGS:-} $* " in
		*" icrc=crypto "*) grep -qw -m1 pclmulqdq /proc/cpuinfo && modprobe -q crc32_pclmul ;;
		esac
		# shellcheck disable=SC2086
		insmod "$RROCE_KO" ${RROCE_KO_ARGS:-} "$@"
		;;
	rxe)
		modprobe rdma_rxe
		;;
	esac
}

drv_unload() {
	drv_loaded || return 0
	rmmod "$MOD"
}

# drv_reload [PARAM=VALUE...]: rroce reloaded (drv_load's parameters, then
# PARAMs, the last of a name winning) and the standard devices back
drv_reload() {
	links_del_all
	drv_unload || return 1
	drv_load "$@" || return 1
	RROCE_NO_LINKS=0 topo_reset
}

# Why the driver cannot be tested here, or nothing.
drv_unavailable() {
	case $RROCE_TYPE in
	rroce) [ -f "$RROCE_KO" ] || echo "rroce.ko not built ($RROCE_KO)" ;;
	rxe) modinfo rdma_rxe >/dev/null 2>&1 || echo "rdma_rxe module not available" ;;
	esac
}

ibdev_exists() { [ -e "$SYS_IB/$1" ]; }
ibdev_count() { local n=0 d; for d in "$SYS_IB"/*; do [ -e "$d" ] && n=$((n + 1)); done; echo $n; }

# link_add NAME NETDEV [NETNS]
link_add() {
	if [ -n "${3:-}" ]; then
		ns "$3" rdma link add "$1" type "$RROCE_TYPE" netdev "$2"
	else
		rdma link add "$1" type "$RROCE_TYPE" netdev "$2"
	fi
}
link_del() { rdma link delete "$1"; }

# Add the two standard devices.
links_add() {
	ibdev_exists "$DEV0" || link_add "$DEV0" "$IF0" || return 1
	ibdev_exists "$DEV1" || link_add "$DEV1" "$IF1" "$NS1" || return 1
}

# Devices of the driver under test: the two standard names plus any name
# starting with the link type (tests name their extra devices that way).
our_ibdevs() {
	local d
	for d in "$SYS_IB"/*; do
		[ -e "$d" ] || continue
		d=${d##*/}
		case $d in "$DEV0"|"$DEV1"|"$RROCE_TYPE"*) echo "$d" ;; esac
	done
}

# Remove every device of ours so the state is known.
links_del_all() {
	local d
	for d in $(our_ibdevs); do rdma link delete "$d" 2>/dev/null; done
	wait_for 10 not our_ibdevs_exist
}
our_ibdevs_exist() { [ -n "$(our_ibdevs)" ]; }

# ip_addrs FAMILY ["global"] < `ip -o addr show` lines: the addresses of that
# family ("inet", "inet6"), all scopes or only scope global, one per line.
ip_addrs() {
	local _i _n fam a rest
	while read -r _i _n fam a rest; do
		[ "$fam" = "$1" ] || continue
		[ "${2:-}" = global ] && [[ " $rest " != *" scope global "* ]] && continue
		printf '%s\n' "$a"
	done
}

# Whether the veth pair is as topo_setup leaves it: $IF0 up with MTU 1500,
# exactly $IP0/24 and (global) $IP6_0/64 on it, $IP1/24 and $IP6_1/64 on
# $IF1 in $NS1.  Two `ip` runs and no other program (each costs ~0.3 s on
# the debug kernel under TCG, and every test script starts with this).
topo_intact() {
	local mtu= state= a b
	read -r mtu <"/sys/class/net/$IF0/mtu" 2>/dev/null && [ "$mtu" = 1500 ] || return 1
	read -r state <"/sys/class/net/$IF0/operstate" 2>/dev/null && [ "$state" = up ] || return 1
	a=$(ip -o addr show dev "$IF0" 2>/dev/null) && b=$(ip -n "$NS1" -o addr show dev "$IF1" 2>/dev/null) || return 1
	[ "$(ip_addrs inet <<<"$a")" = "$IP0/24" ] && [ "$(ip_addrs inet6 global <<<"$a")" = "$IP6_0/64" ] &&
		[ "$(ip_addrs inet <<<"$b")" = "$IP1/24" ] && [ "$(ip_addrs inet6 global <<<"$b")" = "$IP6_1/64" ]
}

# Bring everything back to the standard state: topology, driver loaded,
# exactly $DEV0 and $DEV1 (unless RROCE_NO_LINKS=1).
topo_reset() {
	local d
	# (An MTU below 1280, as mtu.sh sets, removes the IPv6 addresses for
	# good: a topology without them is rebuilt.)
	[ "$RROCE_TYPE" != rxe ] && [ -d /sys/module/rdma_rxe ] && rmmod rdma_rxe
	drv_load || return 1
	# stray devices of ours (other names) go away
	for d in $(our_ibdevs); do
		case $d in "$DEV0"|"$DEV1") ;; *) rdma link delete "$d" 2>/dev/null ;; esac
	done
	if ! topo_intact; then
		ibdev_exists "$DEV0" && rdma link delete "$DEV0"
		ibdev_exists "$DEV1" && rdma link delete "$DEV1"
		topo_setup || return 1
	fi
	[ "${RROCE_NO_LINKS:-0}" = 1 ] && return 0
	links_add || return 1
	wait_for 10 port_active "$DEV0"
}

# --------------------------------------------------------------- ib helpers
# port_attr DEV FILE: /sys/class/infiniband/DEV/ports/1/FILE
port_attr() {
	local v=
	{ read -r v || [ -n "$v" ]; } <"$SYS_IB/$1/ports/1/$2" 2>/dev/null && printf '%s\n' "$v"
}
port_state() { port_attr "$1" state; }
port_active() { [ "$(port_state "$1")" = "4: ACTIVE" ]; }

# gid_v4 A.B.C.D -> the IPv4-mapped GID as sysfs prints it
gid_v4() {
	local IFS=.
	# shellcheck disable=SC2086
	set -- $1
	printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x\n' "$1" "$2" "$3" "$4"
}
# gid_v6 ADDR -> fully expanded IPv6 address, sysfs GID format (in bash: a
# Python start for this cost 2-7 s on the debug kernel under TCG)
gid_v6() {
	local a=${1,,} head tail n g x out=
	if [[ $a == *::* ]]; then head=${a%%::*} tail=${a#*::}; else head=$a tail=; fi
	local IFS=:
	# shellcheck disable=SC2206
	local h=($head) t=($tail)
	# "::" stands for one or more groups of zeros
	n=$((8 - ${#h[@]} - ${#t[@]}))
	local groups=("${h[@]}")
	if [[ $a == *::* ]]; then
		[ "$n" -ge 1 ] || n=-1
		while [ "$n" -gt 0 ]; do groups+=(0) n=$((n - 1)); done
	fi
	groups+=("${t[@]}")
	[ "${#groups[@]}" = 8 ] && [ "$n" = 0 ] || { echo "gid_v6: not an IPv6 address: $1" >&2; return 1; }
	for g in "${groups[@]}"; do
		[[ $g =~ ^[0-9a-f]{1,4}$ ]] || { echo "gid_v6: not an IPv6 address: $1" >&2; return 1; }
		printf -v x '%04x:' "0x$g"
		out+=$x
	done
	echo "${out%:}"
}
# gid_of ADDR -> GID string of an IPv4 or IPv6 address
gid_of() { case $1 in *:*) gid_v6 "$1" ;; *) gid_v4 "$1" ;; esac; }

# gid_table DEV [GID [TYPE]]: "index gid type" lines of the valid entries
# of port 1, by index; with GID (and TYPE), only the first entry that has
# it, and false if none does.  Tables have up to 1024 entries: bash alone,
# no program per entry or per call (each costs ~0.3 s on the debug kernel
# under TCG), and a lookup stops at its entry.
gid_table() {
	local d=$SYS_IB/$1/ports/1 i g t z=0000:0000:0000:0000:0000:0000:0000:0000
	for ((i = 0; ; i++)); do
		[ -e "$d/gids/$i" ] || break
		g=
		read -r g <"$d/gids/$i" 2>/dev/null || continue
		[ -z "$g" ] || [ "$g" = "$z" ] && continue
		[ $# -ge 2 ] && [ "$g" != "$2" ] && continue
		t=
		read -r t <"$d/gid_attrs/types/$i" 2>/dev/null || continue
		[ -n "$t" ] || continue
		[ $# -ge 2 ] && [ "$t" != "${3:-RoCE v2}" ] && continue
		echo "$i $g $t"
		[ $# -ge 2 ] && return 0
	done
	[ $# -lt 2 ]
}

# gid_index DEV GID [TYPE]: index of GID with TYPE ("RoCE v2" by default)
gid_index() {
	local i g t
	read -r i g t < <(gid_table "$1" "$2" "${3:-RoCE v2}") && echo "$i"
}
# gid_present DEV GID [TYPE]
gid_present() { gid_index "$@" >/dev/null; }

# Index of the RoCE v2 GID of 10.77.0.1 on $DEV0 (what perftest -x wants).
gid_index_v4() { gid_index "${1:-$DEV0}" "$(gid_v4 "${2:-$IP0}")"; }

# udp4791 [NETNS]: UDP sockets bound to port 4791 in NETNS (default: the
# current one), printed as "v4count v6count"
udp4791() {
	local v4 v6 pre=()
	[ -n "${1:-}" ] && pre=(ip netns exec "$1")
	v4=$("${pre[@]}" ss -Hnlu4 "sport = :$ROCE_PORT" 2>/dev/null | grep -c .)
	v6=$("${pre[@]}" ss -Hnlu6 "sport = :$ROCE_PORT" 2>/dev/null | grep -c .)
	echo "$v4 $v6"
}

# Does the libibverbs provider exist for the driver under test?
provider_unavailable() {
	case $RROCE_TYPE in
	rroce) [ -f "$RROCE_PROVIDER" ] || echo "provider not built ($RROCE_PROVIDER)" ;;
	rxe) [ -f /etc/libibverbs.d/rxe.driver ] || echo "no rxe provider installed" ;;
	esac
	command -v ibv_devinfo >/dev/null || echo "ibv_devinfo not installed"
}

# peer_gids: the far end of a two-device pyverbs test and the GID indexes
# of both ends: RDEV/RIP = DEV1/IP1 (DEV0/IP0 on rxe, which has no network
# namespace support, so both ends share DEV0), G0/G1 = the IPv4 RoCE v2
# GID indexes of IP0 on DEV0 and RIP on RDEV.  Sets $why (if still empty)
# when one is missing.
peer_gids() {
	RDEV=$DEV1 RIP=$IP1
	if [ "$RROCE_TYPE" = rxe ]; then
		RDEV=$DEV0 RIP=$IP0
	fi
	G0=$(gid_index "$DEV0" "$(gid_v4 "$IP0")")
	G1=$(gid_index "$RDEV" "$(gid_v4 "$RIP")")
	if [ -z "${why:-}" ] && { [ -z "$G0" ] || [ -z "$G1" ]; }; then
		why="no RoCE v2 GID of $IP0 on $DEV0 ('$G0') or of $RIP on $RDEV ('$G1')"
	fi
}

# ------------------------------------------------------------- test framing
# test_init PLAN: header, plan, refuse to run outside a VM, dmesg mark and
# the standard state.  Skips everything if the driver is unavailable.
test_init() {
	ktap_header
	ktap_plan "$1"
	local cmdline=
	if [ "$EUID" != 0 ]; then ktap_skip_all "must run as root"; fi
	read -r cmdline </proc/cmdline
	if [[ $cmdline != *virtme* ]] && [ "${RROCE_ALLOW_HOST:-0}" != 1 ]; then
		ktap_skip_all "not inside the scripts/vm guest (set RROCE_ALLOW_HOST=1 to force)"
	fi
	local why
	why=$(drv_unavailable)
	[ -z "$why" ] || ktap_skip_all "$why"
	diag "driver under test: $RROCE_TYPE ($DEV0 on $IF0, $DEV1 on $IF1 in netns $NS1)"
	dmesg_mark
	if ! RROCE_NO_LINKS=0 topo_reset; then
		ktap_fail "set up the standard topology and devices"
		while [ "$_t_num" -lt "$_t_plan" ]; do ktap_skip "$TEST_NAME" "setup failed"; done
		exit $KSFT_FAIL
	fi
}

# test_done: dmesg subtest (counted in the plan), restore, exit.
# Under selftests/run.sh (RROCE_IN_SUITE=1) the restore is left to the next
# script's test_init, which resets the topology anyway (~20 s of `ip` and
# `rdma` commands on the debug kernel under TCG, once instead of twice).
test_done() {
	check_dmesg
	if [ "${RROCE_IN_SUITE:-0}" != 1 ]; then
		RROCE_NO_LINKS=0 topo_reset >/dev/null 2>&1 || diag "could not restore the standard topology"
	fi
	ktap_finished
}

# py_checks DESC SCRIPT ARGS...: one subtest that runs a pyverbs check
# script (selftests/py/SCRIPT) and fails if it exits non-zero or prints a
# "not ok" line; its output (unbuffered: a crash loses none of it) becomes
# TAP diagnostics.  With $PY_CHECKS_TMO set, the script is killed (and the
# subtest fails) after that many seconds.
py_checks() {
	local desc=$1 script=$2 out rc l pyt=()
	shift 2
	[ -n "${PY_CHECKS_TMO:-}" ] && pyt=(timeout "$PY_CHECKS_TMO")
	t_begin "$desc"
	out=$("${pyt[@]}" /usr/bin/python3 -u "$RROCE_REPO/selftests/py/$script" "$@" 2>&1)
	rc=$?
	while IFS= read -r l; do diag "$l"; done <<<"$out"
	if [ $rc = 124 ] && [ ${#pyt[@]} -gt 0 ]; then
		t_fail "$script killed after ${PY_CHECKS_TMO}s"
	elif [ $rc != 0 ]; then
		t_fail "$script exited $rc"
	fi
	grep -q '^not ok' <<<"$out" && t_fail "a check of $script failed"
	t_end
}

# py_cases SCRIPT ARGS... -- NAME|DESC...: one subtest per case, all cases
# run by one process of a pyverbs check script that takes its case names
# last and runs them with taplib.run_cases ("#@ begin NAME" ... "#@ end NAME
# ok|fail" around each), so the Python start (seconds under TCG) is paid
# once.  Each case's output becomes its subtest's diagnostics; a case fails
# on its "#@ end NAME fail" line (a "not ok" check, an exception, its
# --limit) or when the process ended before that line
# (a crash, or the whole run killed after $PY_CHECKS_TMO seconds per
# case).
py_cases() {
	local script=$1 args=() names=() descs=() c out rc i pre sec l tmo pyt=()
	shift
	while [ $# -gt 0 ] && [ "$1" != -- ]; do args+=("$1"); shift; done
	shift
	for c in "$@"; do names+=("${c%%|*}"); descs+=("${c#*|}"); done
	if [ -n "${PY_CHECKS_TMO:-}" ]; then
		tmo=$((PY_CHECKS_TMO * ${#names[@]}))
		pyt=(timeout "$tmo")
	fi
	out=$("${pyt[@]}" /usr/bin/python3 -u "$RROCE_REPO/selftests/py/$script" "${args[@]}" "${names[@]}" 2>&1)
	rc=$?
	# lines before the first case (an import error, say) go to the first
	pre=$(sed -n '/^#@ begin /q;p' <<<"$out")
	for i in "${!names[@]}"; do
		t_begin "${descs[$i]}"
		sec=$pre$'\n'$(awk -v n="${names[$i]}" '$0 == "#@ begin " n { on = 1; next } on && /^#@ end / { print; exit } on' <<<"$out")
		while IFS= read -r l; do
			case $l in "#@ end "*) ;; ?*) diag "$l" ;; esac
		done <<<"$sec"
		case $(tail -n1 <<<"$sec") in
		"#@ end ${names[$i]} ok") ;;
		"#@ end ${names[$i]} fail") t_fail "a check of case ${names[$i]} failed" ;;
		*) if [ $rc = 124 ] && [ ${#pyt[@]} -gt 0 ]; then
			t_fail "$script killed after ${tmo}s before case ${names[$i]} ended"
		else
			t_fail "$script exited $rc before case ${names[$i]} ended"
		fi ;;
		esac
		t_end
		pre=
	done
}

# ------------------------------------------------------------ traffic tests
# datapath_unavailable [DEV [ADDR]]: why DEV (default $DEV0) cannot carry
# traffic yet, or nothing.  rroce is probed with py/has_datapath.py on the
# RoCE v2 GID of ADDR (default $IP0): its exit 4 means the kernel does not
# take posted work yet.  rxe always has a data path.  A probe failing in any
# other way is no reason to skip: it prints a diagnostic (on stderr) and
# the test goes on into the real failure.
# The answer is a property of the module file, so a probe that succeeded
# is remembered for the rest of the boot (in /run, named after the
# module's path, valid while newer than the module): a Python start costs
# ~10-30 s on the debug kernel under TCG, and every traffic test asks.
datapath_unavailable() {
	local dev=${1:-$DEV0} idx out rc memo
	[ "$RROCE_TYPE" = rroce ] || return 0
	memo=/run/rroce-datapath.${RROCE_KO//[^A-Za-z0-9._-]/_}
	[ "$memo" -nt "$RROCE_KO" ] && return 0
	idx=$(gid_index "$dev" "$(gid_of "${2:-$IP0}")")
	out=$(/usr/bin/python3 "$RROCE_REPO/selftests/py/has_datapath.py" "$dev" "${idx:-1}" 2>&1)
	rc=$?
	case $rc in
	0) : 2>/dev/null >"$memo" ;;
	4) echo "no data path yet (has_datapath.py $dev: $out)" ;;
	*) diag "data-path probe on $dev exited $rc: $(printf '%s' "$out" | tail -3 | tr '\n' ' ')" >&2 ;;
	esac
	return 0
}

# tcp_listening_in PID PORT: a socket listens on TCP PORT (IPv4 or IPv6) in
# the network namespace of process PID (alive).  Reads /proc/PID/net/tcp
# and tcp6 with bash alone: one `ss` took 2-3 s in a plain VM beside a
# busy host, and a wait polling it noticed a server seconds late.
tcp_listening_in() {
	local f sl addr rem st rest hex
	printf -v hex '%04X' "$2"
	for f in "/proc/$1/net/tcp" "/proc/$1/net/tcp6"; do
		[ -r "$f" ] || continue
		while read -r sl addr rem st rest; do
			[ "$st" = 0A ] && [ "${addr##*:}" = "$hex" ] && return 0
		done <"$f"
	done
	return 1
}

# pair_run TMO SERVER_NS CLIENT_NS PORT SERVER_CMD... -- CLIENT_CMD...
# A client/server pair (ibv_*_pingpong, perftest) talking over TCP PORT:
# SERVER_CMD starts in the background in netns SERVER_NS ("" = init_net);
# once it listens on PORT, CLIENT_CMD runs in CLIENT_NS.  Each side is
# killed after TMO s (times $RROCE_TIMEOUT_SCALE); a server still running
# 10 s after its client failed is killed too.  Output: files $PAIR_SRV and
# $PAIR_CLI; exit codes: $pair_src, $pair_crc (124: timed out).  Every
# problem is a t_fail (with the last lines of output); returns 0 if both
# sides exited 0.
PAIR_SRV=/tmp/rroce-pair.$$.srv
PAIR_CLI=/tmp/rroce-pair.$$.cli
pair_src='' pair_crc=''
_pair_spid=
_pair_server_up() { ! kill -0 "$_pair_spid" 2>/dev/null || tcp_listening_in "$_pair_spid" "$1"; }
pair_run() {
	local tmo=$(($1 * ${RROCE_TIMEOUT_SCALE:-1})) sns=$2 cns=$3 port=$4
	local srv=() spre=() cpre=() ok=0
	shift 4
	while [ $# -gt 0 ] && [ "$1" != -- ]; do srv+=("$1"); shift; done
	shift
	[ -n "$sns" ] && spre=(ip netns exec "$sns")
	[ -n "$cns" ] && cpre=(ip netns exec "$cns")
	pair_src=- pair_crc=-
	: >"$PAIR_CLI"
	# line-buffered: a side killed on timeout still shows how far it got
	"${spre[@]}" timeout "$tmo" stdbuf -oL "${srv[@]}" >"$PAIR_SRV" 2>&1 &
	_pair_spid=$!
	# ($! is `timeout`, in SERVER_NS: ip netns exec execs it)
	wait_for 30 _pair_server_up "$port"
	if ! tcp_listening_in "$_pair_spid" "$port"; then
		kill "$_pair_spid" 2>/dev/null
		wait "$_pair_spid"
		pair_src=$?
		t_fail "${srv[0]} server (${sns:-init_net}) not listening on TCP $port, exit $pair_src: $(tail -3 "$PAIR_SRV" | tr '\n' ' ')"
		return 1
	fi
	"${cpre[@]}" timeout "$tmo" stdbuf -oL "$@" >"$PAIR_CLI" 2>&1
	pair_crc=$?
	if [ "$pair_crc" != 0 ] && ! wait_for 10 not kill -0 "$_pair_spid"; then
		kill "$_pair_spid" 2>/dev/null
	fi
	wait "$_pair_spid"
	pair_src=$?
	[ "$pair_crc" = 124 ] && t_fail "$1 client timed out after ${tmo}s"
	[ "$pair_src" = 124 ] && t_fail "${srv[0]} server timed out after ${tmo}s"
	if [ "$pair_crc" != 0 ]; then
		t_fail "$1 client (${cns:-init_net}) exited $pair_crc: $(tail -3 "$PAIR_CLI" | tr '\n' ' ')"
		ok=1
	fi
	if [ "$pair_src" != 0 ]; then
		t_fail "${srv[0]} server (${sns:-init_net}) exited $pair_src: $(tail -3 "$PAIR_SRV" | tr '\n' ' ')"
		ok=1
	fi
	return $ok
}

# perftest_row FILE SIZE: perftest's result row for SIZE-byte messages
# (" #bytes #iterations figures...") from FILE, the last one; empty if none.
# The figures may be "inf"/"nan" when perftest could not calibrate its
# cycle counter (a busy host stalls the VM during get_cpu_mhz(): "r^2 <
# 0.9"); the transfer itself ran, so callers check the iterations and
# report the figures as missing (perftest_figures_ok).
perftest_row() {
	grep -E "^ *$2 +[0-9]+ +" "$1" | tail -1
}
# perftest_figures_ok FILE ROW: the row's figures are numbers, or else FILE
# shows the clock-calibration failure (then a diag says so).  A t_fail if
# the figures are missing for any other reason.  One figure may be NaN:
# perftest's latency standard deviation comes out as -nan when one sample
# is an extreme outlier (CI, 2026-12-04: ib_read_lat t_max 148 ms against
# a typical 116 us), the other figures are still there.
perftest_figures_ok() {
	# shellcheck disable=SC2086  # the row's fields
	set -- "$1" $2
	local f=$1 nan
	shift 3
	nan=$(printf '%s\n' "$@" | grep -cE '^-?nan$')
	if [ $# -gt 0 ] && [ "$nan" -le 1 ] && ! printf '%s\n' "$@" | grep -vE '^-?nan$' | grep -qvE '^[0-9.]+$'; then
		[ "$nan" = 0 ] || diag "perftest printed one figure as NaN (an outlier sample): $*"
		return 0
	fi
	if grep -qF "Correlation coefficient r^2" "$f"; then
		diag "perftest could not calibrate its cycle counter (the host stalled the VM: $(grep -m1 -F "Correlation coefficient" "$f")): transfer done, no figures"
		return 1
	fi
	t_fail "perftest printed no figures: $(tail -3 "$f" | tr '\n' ' ')"
	return 1
}

# rc_pingpong_chk TMO SERVER_NS SERVER_DEV SERVER_IP CLIENT_NS CLIENT_DEV CLIENT_IP SIZE ITERS [ARGS...]
# ibv_rc_pingpong -c (buffer validation: the server checks every page of what
# it received) between two devices, each on the RoCE v2 GID of its IPv4
# address, over TCP port $RC_PORT (incremented first).  A t_fail unless both
# exit 0, both report ITERS exchanges of SIZE bytes, the client got the
# server's GID, and the server found no invalid data.  With PP_PROG set
# (ibv_uc_pingpong, ibv_srq_pingpong: same -c and output), that program instead.
RC_PORT=${RC_PORT:-18700}
rc_pingpong_chk() {
	local tmo=$1 sns=$2 sdev=$3 sip=$4 cns=$5 cdev=$6 cip=$7 size=$8 iters=$9 sidx cidx bytes
	shift 9
	RC_PORT=$((RC_PORT + 1))
	bytes=$((size * iters * 2))
	sidx=$(gid_index "$sdev" "$(gid_v4 "$sip")")
	cidx=$(gid_index "$cdev" "$(gid_v4 "$cip")")
	if [ -z "$sidx" ] || [ -z "$cidx" ]; then
		t_fail "no RoCE v2 GID of $sip on $sdev ('$sidx') or of $cip on $cdev ('$cidx')"
		return 1
	fi
	pair_run "$tmo" "$sns" "$cns" "$RC_PORT" \
		"${PP_PROG:-ibv_rc_pingpong}" -c -d "$sdev" -g "$sidx" -p "$RC_PORT" -s "$size" -n "$iters" "$@" -- \
		"${PP_PROG:-ibv_rc_pingpong}" -c -d "$cdev" -g "$cidx" -p "$RC_PORT" -s "$size" -n "$iters" "$@" "$sip"
	diag "client: $(grep -E '(bytes|iters) in' "$PAIR_CLI" | tr '\n' ' ')"
	grep -q "remote address: .* GID ::ffff:$sip\$" "$PAIR_CLI" ||
		t_fail "client did not get the server's GID ::ffff:$sip"
	grep -q "^$bytes bytes in" "$PAIR_CLI" || t_fail "client did not report $bytes bytes moved"
	grep -q "^$iters iters in" "$PAIR_SRV" || t_fail "server did not report $iters iters"
	if grep -q "invalid data" "$PAIR_SRV"; then
		t_fail "server found bad data: $(grep "invalid data" "$PAIR_SRV" | head -3 | tr '\n' ' ')"
	fi
}

# ------------------------------------------------------------- hw counters
# The port counters of rroce (sysfs .../ports/1/hw_counters/, also shown by
# `rdma statistic`).
HWC_NAMES="rx_packets tx_packets rx_dropped rx_icrc_errors tx_errors retransmits ack_timeouts seq_naks_rcvd rnr_naks_rcvd retry_exceeded rnr_retry_exceeded duplicate_requests out_of_sequence rnr_naks_sent completion_errors uc_dropped ignored_responses access_naks_sent invalid_naks_sent resp_backpressure odp_faults odp_stall_drops xrc_bad_srqn window_cuts tx_waits rx_linearized"
hwc_dir() { echo "$SYS_IB/$1/ports/1/hw_counters"; }

# hwc_missing DEV: why DEV's counters cannot be read (missing directory or
# names), or nothing.
hwc_missing() {
	local d n miss=
	d=$(hwc_dir "$1")
	[ -d "$d" ] || { echo "$d does not exist"; return 0; }
	for n in $HWC_NAMES; do [ -r "$d/$n" ] || miss="$miss $n"; done
	[ -z "$miss" ] || echo "$d lacks:$miss"
}

# hwc_snap DEV ARRAY: read every counter of DEV into the associative array
# ARRAY (declare -A it first); missing counters read as 0.
hwc_snap() {
	local -n _a=$2
	local d n v
	d=$(hwc_dir "$1")
	for n in $HWC_NAMES; do
		v=0
		read -r v <"$d/$n" 2>/dev/null || v=0
		_a[$n]=${v:-0}
	done
}

# hwc_delta BEFORE AFTER DELTA: DELTA[n] = AFTER[n] - BEFORE[n]
hwc_delta() {
	local -n _b=$1 _af=$2 _d=$3
	local n
	for n in $HWC_NAMES; do _d[$n]=$((${_af[$n]:-0} - ${_b[$n]:-0})); done
}

# hwc_show DELTA: the non-zero entries as "name +N ..." (or "none")
hwc_show() {
	local -n _s=$1
	local n out=
	for n in $HWC_NAMES; do
		[ "${_s[$n]:-0}" != 0 ] && out="$out $n +${_s[$n]}"
	done
	echo "${out:- none}"
}

# ------------------------------------------------------ RC transfer tests
# Used by rc_verify and rc_netem_*: py/rc_xfer.py between $DEV0 (requester,
# init_net) and $DEV1 (responder, netns peer), QP pairs connected directly
# in one process, packets over the veth.

# Packet captures (tshark, icrc): capture_init NAME makes $TMPD (removed at
# exit, with any capture still running stopped); capture_start FILE runs
# dumpcap on $IF0 for UDP $ROCE_PORT into FILE (classic pcap, what
# py/icrc_check.py reads) and returns once it captures, false (with a
# t_fail) if it does not start; capture_stop ends it (dumpcap flushes).
capture_init() {
	TMPD=$(mktemp -d "/tmp/rroce-$1.XXXXXX")
	CAP_PID=
	trap capture_cleanup EXIT
}
# shellcheck disable=SC2317  # called by the trap
capture_cleanup() {
	[ -n "$CAP_PID" ] && kill "$CAP_PID" 2>/dev/null && wait "$CAP_PID" 2>/dev/null
	rm -rf "$TMPD"
}
# shellcheck disable=SC2317  # called through wait_for
_capture_started() { grep -q "File:" "$TMPD/dumpcap.log" || ! kill -0 "$CAP_PID" 2>/dev/null; }
capture_start() {
	dumpcap -q -P -i "$IF0" -f "udp port $ROCE_PORT" -B 64 -w "$1" >"$TMPD/dumpcap.log" 2>&1 &
	CAP_PID=$!
	# dumpcap has the interface once it names the file it writes
	wait_for 60 _capture_started
	grep -q "File:" "$TMPD/dumpcap.log" && return 0
	t_fail "dumpcap did not start capturing on $IF0: $(tr '\n' ' ' <"$TMPD/dumpcap.log")"
	capture_stop
	return 1
}
capture_stop() {
	[ -n "$CAP_PID" ] || return 0
	kill -INT "$CAP_PID" 2>/dev/null
	wait "$CAP_PID" 2>/dev/null
	CAP_PID=
	diag "dumpcap: $(grep -iE 'packets|dropped' "$TMPD/dumpcap.log" | tr '\n' ' ')"
}

# rc_xfer_setup: sets RC_WHY (why no traffic can run, or empty), RC_G0/RC_G1
# (the RoCE v2 GID indexes of $IP0 on $DEV0 and $IP1 on $DEV1) and HWC_WHY
# (why the hw_counters cannot be read, or empty).
rc_xfer_setup() {
	RC_WHY=$(provider_unavailable)
	[ -n "$RC_WHY" ] || RC_WHY=$(datapath_unavailable "$DEV0" "$IP0")
	if [ -z "$RC_WHY" ] && [ "$RROCE_TYPE" = rxe ]; then
		RC_WHY="rxe 6.12 has no network namespace support ($DEV1 cannot reach $DEV0)"
	fi
	RC_G0=$(gid_index "$DEV0" "$(gid_v4 "$IP0")")
	RC_G1=$(gid_index "$DEV1" "$(gid_v4 "$IP1")")
	if [ -z "$RC_WHY" ] && { [ -z "$RC_G0" ] || [ -z "$RC_G1" ]; }; then
		RC_WHY="no RoCE v2 GID of $IP0 on $DEV0 ('$RC_G0') or of $IP1 on $DEV1 ('$RC_G1')"
	fi
	HWC_WHY=$(hwc_missing "$DEV0")
	[ -n "$HWC_WHY" ] || HWC_WHY=$(hwc_missing "$DEV1")
}

# rc_xfer TMO ARGS...: rc_xfer.py $DEV0 -> $DEV1 with ARGS, killed after TMO
# s (times $RROCE_TIMEOUT_SCALE; its per-operation deadline is 20 s less).
# Its output, the time taken and the counter deltas of both devices (left in
# the associative arrays XD0 and XD1) become diagnostics; XFER_MTU is the
# path MTU it used.  t_fail unless it exits 0.
declare -A XB0 XB1 XA0 XA1 XD0 XD1
XFER_MTU=
# Local ACK timeout exponent of the transfers: 14 (67 ms, perftest's
# default) on the plain kernel; 18 (1.07 s) on the debug kernel, which under
# TCG with KASAN and lockdep can take longer than 67 ms to answer a window
# of packets, so that a healthy but slow link would exhaust retry_cnt.
RC_ACK_TIMEOUT=${RC_ACK_TIMEOUT:-$([ "${RROCE_KERNEL_FLAVOR:-plain}" = debug ] && echo 18 || echo 14)}
rc_xfer() {
	local tmo=$(($1 * ${RROCE_TIMEOUT_SCALE:-1})) rc start out=/tmp/rroce-xfer.$$ l
	shift
	hwc_snap "$DEV0" XB0
	hwc_snap "$DEV1" XB1
	start=$EPOCHSECONDS
	timeout "$tmo" /usr/bin/python3 "$RROCE_REPO/selftests/py/rc_xfer.py" "$DEV0" "$RC_G0" "$DEV1" "$RC_G1" \
		--deadline $((tmo - 20)) --timeout "$RC_ACK_TIMEOUT" "$@" >"$out" 2>&1
	rc=$?
	hwc_snap "$DEV0" XA0
	hwc_snap "$DEV1" XA1
	hwc_delta XB0 XA0 XD0
	hwc_delta XB1 XA1 XD1
	while IFS= read -r l; do diag "$l"; done <"$out"
	diag "took $((EPOCHSECONDS - start)) s"
	diag "$DEV0 counters:$(hwc_show XD0)"
	diag "$DEV1 counters:$(hwc_show XD1)"
	XFER_MTU=$(sed -n 's/.*path MTU \([0-9]*\),.*/\1/p' "$out" | head -1)
	if [ $rc = 124 ]; then
		t_fail "rc_xfer.py killed after ${tmo}s"
	elif [ $rc != 0 ]; then
		t_fail "rc_xfer.py exited $rc: $(grep -m1 -E '^FAIL|Error' "$out")"
	fi
	rm -f "$out"
	return $rc
}

# rc_no_errors: after rc_xfer, no error completions, no retry exhaustion
# and no ICRC errors on either device
rc_no_errors() {
	local c
	for c in completion_errors retry_exceeded rnr_retry_exceeded rx_icrc_errors; do
		expect_eq "$DEV0 $c delta" "${XD0[$c]}" 0
		expect_eq "$DEV1 $c delta" "${XD1[$c]}" 0
	done
}

# rc_netem_need: the packets $RC_NETEM_TOTAL (16M or 8M) needs at the path
# MTU of the last rc_xfer (nothing if either is unknown)
rc_netem_need() {
	local mib=${RC_NETEM_TOTAL%M}
	[ -n "$XFER_MTU" ] && [ "$mib" != "$RC_NETEM_TOTAL" ] && echo $((mib * 1048576 / XFER_MTU))
}

# rc_bounded_resends OP: after rc_xfer of $RC_NETEM_TOTAL (16M or 8M) by OP,
# the data's sender (DEV0's requester for send/write, DEV1's responder for
# read) sent at most 32 times the packets the data needs.  A go-back-N
# resends a window; READ under netem reorder once sent 179 times as many
# (duplicate response streams for every READ in flight at each retry).
rc_bounded_resends() {
	local sent need
	need=$(rc_netem_need) || return 0
	if [ "$1" = read ]; then sent=${XD1[tx_packets]}; else sent=${XD0[tx_packets]}; fi
	diag "$1: the data's sender sent $sent packets for $need"
	[ "$sent" -le $((32 * need)) ] || t_fail "$1: the data's sender sent $sent packets, more than 32 x $need"
}

# t_fresh_xfer WHEN: the subtest "fresh transfer WHEN" (after rc_xfer_setup):
# SEND/WRITE/READ 1 MiB $DEV0 -> $DEV1, data verified, no error counted
t_fresh_xfer() {
	t_begin "fresh transfer $1: send/write/read 1 MiB, data verified"
	if [ -n "$RC_WHY" ]; then
		t_skip "$RC_WHY"
		return 0
	fi
	rc_xfer 300 --ops send,write,read --total 1M --msg 64K && [ -z "$HWC_WHY" ] && rc_no_errors
	t_end
}

# at_least WHAT GOT MIN
at_least() {
	[ "$2" -ge "$3" ] 2>/dev/null || t_fail "$1: $2, want at least $3"
}

# netem_set ARGS...: the same netem qdisc (or $RC_QDISC: tbf) on the
# egress of rr0 (requests) and rr1 (responses, ACKs); netem_clear removes
# both.
netem_clear() {
	tc qdisc del dev "$IF0" root 2>/dev/null
	ns "$NS1" tc qdisc del dev "$IF1" root 2>/dev/null
	return 0
}
netem_set() {
	netem_clear
	tc qdisc add dev "$IF0" root "${RC_QDISC:-netem}" "$@" &&
		ns "$NS1" tc qdisc add dev "$IF1" root "${RC_QDISC:-netem}" "$@"
}
netem_stats() {
	diag "$IF0 qdisc: $(tc -s qdisc show dev "$IF0" | grep -m1 -o 'Sent.*')"
	diag "$IF1 qdisc: $(ns "$NS1" tc -s qdisc show dev "$IF1" | grep -m1 -o 'Sent.*')"
}

# rc_netem_test SPEC CHECK: a whole test: SEND, RDMA WRITE and RDMA READ of
# $RC_NETEM_TOTAL each (256 KiB messages, all data verified) with "netem
# SPEC" on both veth ends; after each, rc_no_errors and CHECK OP (a
# function asserting on XD0/XD1 that the counters show the recovery).  The
# qdiscs are always removed.  Default size 16 MiB (16,384 packets at MTU
# 1024: hundreds of impairments per transfer, the same paths as the 64 MiB
# used until 2026-12-04, which cost ~4 min of the plain suite's CPU); 8 MiB on
# the debug kernel, where KASAN and lockdep make it slow.
rc_netem_test() {
	local spec=$1 check=$2 op nwhy out rc size
	size=16M
	[ "${RROCE_KERNEL_FLAVOR:-plain}" = debug ] && size=8M
	RC_NETEM_TOTAL=${RC_NETEM_TOTAL:-$size}
	test_init 4
	trap 'netem_clear' EXIT
	rc_xfer_setup
	nwhy=$RC_WHY
	if [ -z "$nwhy" ]; then
		# shellcheck disable=SC2086  # SPEC is several words
		out=$(netem_set $spec 2>&1) || nwhy="cannot add the ${RC_QDISC:-netem} qdisc ($spec): $out"
	fi
	for op in send write read; do
		t_begin "$op $RC_NETEM_TOTAL under ${RC_QDISC:-netem} $spec on $IF0 and $IF1: data verified, counters show recovery"
		if [ -n "$RC_WHY" ]; then
			t_skip "$RC_WHY"
			continue
		fi
		if [ -n "$nwhy" ]; then
			t_fail "$nwhy"
			t_end
			continue
		fi
		rc_xfer 600 --ops "$op" --total "$RC_NETEM_TOTAL" --msg 256K
		rc=$?
		netem_stats
		if [ -n "$HWC_WHY" ]; then
			t_fail "no counters: $HWC_WHY"
		elif [ $rc = 0 ]; then
			rc_no_errors
			rc_bounded_resends "$op"
			"$check" "$op"
		fi
		t_end
	done
	netem_clear
	test_done
}

# ------------------------------------------------------------ C test programs
# c_prog NAME: build selftests/c/NAME.c (cc, -libverbs) into
# build/selftests/bin/NAME if the binary is missing or older than the
# source, and print its path; on failure print the compiler output, false.
c_prog() {
	local src=$RROCE_SELFTESTS/c/$1.c dir=$RROCE_REPO/build/selftests/bin out
	mkdir -p "$dir" || return 1
	if [ ! -x "$dir/$1" ] || [ "$src" -nt "$dir/$1" ]; then
		out=$(cc -O2 -g -Wall -Wextra -Wno-missing-field-initializers -o "$dir/$1" "$src" -libverbs -pthread 2>&1) || {
			printf '%s\n' "$out" | head -20
			return 1
		}
	fi
	echo "$dir/$1"
}

# mpi_prog NAME: like c_prog, with mpicc (Open MPI), no libibverbs.
mpi_prog() {
	local src=$RROCE_SELFTESTS/c/$1.c dir=$RROCE_REPO/build/selftests/bin out
	mkdir -p "$dir" || return 1
	if [ ! -x "$dir/$1" ] || [ "$src" -nt "$dir/$1" ]; then
		out=$(mpicc -O2 -Wall -o "$dir/$1" "$src" 2>&1) || {
			printf '%s\n' "$out" | head -20
			return 1
		}
	fi
	echo "$dir/$1"
}

# Why C test programs cannot be built here, or nothing.
c_prog_unavailable() {
	command -v cc >/dev/null || { echo "no C compiler (cc)"; return 0; }
	[ -f /usr/include/infiniband/verbs.h ] || echo "libibverbs-dev not installed"
}

# blocked_stacks: the kernel stacks of all tasks in uninterruptible sleep
# (state D), one diag line each.
blocked_stacks() {
	local p st
	for p in /proc/[0-9]*; do
		st=$(awk '/^State:/ { print $2 }' "$p/status" 2>/dev/null)
		[ "$st" = D ] || continue
		diag "blocked: $(cat "$p/comm" 2>/dev/null) ${p#/proc/}: $(tr '\n' ' ' <"$p/stack" 2>/dev/null)"
	done
}

# bounded TMO CMD...: run CMD for at most TMO seconds; if it is still
# running then, the stacks of the blocked tasks go to diag, CMD is killed
# (SIGKILL: timeout(1)'s SIGTERM does not end a task blocked in the
# kernel) and the status is 124.
bounded() {
	local end=$((SECONDS + $1)) pid
	shift
	"$@" &
	pid=$!
	while [ "$SECONDS" -lt "$end" ]; do
		kill -0 "$pid" 2>/dev/null || { wait "$pid"; return; }
		nap 0.2
	done
	diag "still running after the bound: $*"
	blocked_stacks
	kill -9 "$pid" 2>/dev/null
	return 124
}

# ------------------------------------------- a wire for init_net-only ULPs
# nvmet/nvme-rdma, isert/ib_iser and ksmbd/cifs create their rdma_cm ids in
# init_net, so both of their devices need netdevs there: a dedicated veth
# pair $VL_A ($VL_IPA, $VL_DEVA) -- $VL_B ($VL_IPB, $VL_DEVB).  Two
# addresses of one namespace normally reach each other through lo; policy
# routing (rules "to <peer> iif lo" ahead of the local table) sends the
# traffic out of the veth instead, accept_local/rp_filter let it in on the
# other side, and the neighbours are static.  Counters of $VL_A prove the
# traffic crossed the veth.  vl_down undoes everything (and the standard
# topology is left as it was).
VL_A=vl0 VL_B=vl1 VL_IPA=10.79.0.1 VL_IPB=10.79.0.2
VL_DEVA=${RROCE_TYPE}_vl0 VL_DEVB=${RROCE_TYPE}_vl1
_vl_rules=0 _vl_sysctl=()

# _vl_sysctl_set KEY VALUE: set, remembering the old value for vl_down.
_vl_sysctl_set() {
	_vl_sysctl+=("$1=$(sysctl -n "$1")")
	sysctl -qw "$1=$2"
}

# vl_up: the veth pair, its routing and the two devices, ports active; a
# t_fail and status 1 at the first step that fails.
vl_up() {
	local m mac_a mac_b
	ip link del "$VL_A" 2>/dev/null
	ip link add "$VL_A" type veth peer name "$VL_B" || { t_fail "ip link add $VL_A veth $VL_B"; return 1; }
	for m in "$VL_A" "$VL_B"; do
		sysctl -qw "net.ipv6.conf.$m.disable_ipv6=1"
		sysctl -qw "net.ipv4.conf.$m.accept_local=1"
		sysctl -qw "net.ipv4.conf.$m.rp_filter=0"
	done
	_vl_sysctl_set net.ipv4.conf.all.rp_filter 0
	ip addr add "$VL_IPA/24" dev "$VL_A" && ip addr add "$VL_IPB/24" dev "$VL_B" &&
		ip link set "$VL_A" up && ip link set "$VL_B" up || { t_fail "addresses on $VL_A/$VL_B"; return 1; }
	mac_a=$(cat "/sys/class/net/$VL_A/address") mac_b=$(cat "/sys/class/net/$VL_B/address")
	ip neigh replace "$VL_IPB" lladdr "$mac_b" dev "$VL_A" nud permanent &&
		ip neigh replace "$VL_IPA" lladdr "$mac_a" dev "$VL_B" nud permanent || { t_fail "static neighbours"; return 1; }
	# locally sent traffic to the peer's address leaves through the veth
	ip route add "$VL_IPB" dev "$VL_A" src "$VL_IPA" table 4791 &&
		ip route add "$VL_IPA" dev "$VL_B" src "$VL_IPB" table 4792 &&
		ip rule add pref 10 to "$VL_IPB" iif lo lookup 4791 &&
		ip rule add pref 11 to "$VL_IPA" iif lo lookup 4792 &&
		ip rule add pref 100 lookup local && ip rule del pref 0 lookup local || { t_fail "policy routing"; return 1; }
	_vl_rules=1
	link_add "$VL_DEVA" "$VL_A" && link_add "$VL_DEVB" "$VL_B" || { t_fail "rdma link add $VL_DEVA/$VL_DEVB"; return 1; }
	wait_for 10 port_active "$VL_DEVA" && wait_for 10 port_active "$VL_DEVB" ||
		{ t_fail "ports not active: $(port_state "$VL_DEVA") / $(port_state "$VL_DEVB")"; return 1; }
}

# vl_down: remove the devices, the veth and the routing; restore sysctls.
vl_down() {
	local kv
	ibdev_exists "$VL_DEVA" && rdma link delete "$VL_DEVA"
	ibdev_exists "$VL_DEVB" && rdma link delete "$VL_DEVB"
	ip link del "$VL_A" 2>/dev/null
	if [ "$_vl_rules" = 1 ]; then
		ip rule add pref 0 lookup local
		ip rule del pref 100 lookup local
		ip rule del pref 10 2>/dev/null
		ip rule del pref 11 2>/dev/null
		ip route flush table 4791 2>/dev/null
		ip route flush table 4792 2>/dev/null
		_vl_rules=0
	fi
	for kv in "${_vl_sysctl[@]}"; do sysctl -qw "$kv"; done
	_vl_sysctl=()
	return 0
}

# vl_bytes: bytes sent plus received by $VL_A so far.
vl_bytes() { echo $(($(cat "/sys/class/net/$VL_A/statistics/tx_bytes") + $(cat "/sys/class/net/$VL_A/statistics/rx_bytes"))); }

# vl_mark, then vl_covers BYTES: a diag of what $VL_A moved since the mark,
# and a t_fail unless that covers BYTES of I/O.
vl_mark() { _vl_bytes0=$(vl_bytes); }
vl_covers() {
	local d=$(($(vl_bytes) - _vl_bytes0))
	diag "$VL_A: $d B sent and received for $1 B written and read"
	[ "$d" -ge "$1" ] || t_fail "only $d B on $VL_A for $1 B of I/O"
}

# devs_mark DEV...: remember the counters of each DEV; devs_clean then
# looks at what changed since (a session torn down before, e.g. a discovery
# session, flushes its receive queue: completions in error that are not a
# fault).
declare -A _devs_base=()
devs_mark() {
	local d n
	for d in "$@"; do
		for n in $HWC_NAMES; do _devs_base[$d.$n]=$(cat "$(hwc_dir "$d")/$n" 2>/dev/null || echo 0); done
	done
}

# devs_clean DEV...: a diag of the counters of each DEV that are not zero
# (since devs_mark, if it was called), of the packets the stack dropped on
# full per-CPU backlogs, and a t_fail for any completion or ICRC error.
devs_clean() {
	local d n v out since
	for d in "$@"; do
		out= since=
		for n in $HWC_NAMES; do
			v=$(cat "$(hwc_dir "$d")/$n" 2>/dev/null) || v=
			[ -n "${_devs_base[$d.$n]:-}" ] && { v=$((v - _devs_base[$d.$n])); since=" since the mark"; }
			[ "${v:-0}" = 0 ] || out="$out $n $v"
		done
		diag "$d, non-zero counters$since:${out:- none}"
		for n in completion_errors rx_icrc_errors; do
			grep -qw "$n" <<<"$out" && t_fail "$d: $n"
		done
	done
	diag "packets dropped on full per-CPU backlogs (softnet_stat, all CPUs, since boot): $(softnet_drops)"
}

# softnet_drops: packets dropped on full per-CPU backlogs, all CPUs (column
# 2 of /proc/net/softnet_stat, hex): a loss that go-back-N then repairs.
softnet_drops() {
	local n=0 _p d _r
	while read -r _p d _r; do n=$((n + 16#$d)); done </proc/net/softnet_stat
	echo "$n"
}

# blk_xfers BLOCKDEV: the four blk_xfer subtests of the block-storage
# tests: 4 KiB at 0, 64 KiB at 192 KiB, 1 MiB at 8 MiB, 4 MiB at 16 MiB.
blk_xfers() {
	blk_xfer "O_DIRECT write+read 4 KiB at 0, compared byte for byte" "$1" 4096 1 0
	blk_xfer "O_DIRECT write+read 64 KiB at 192 KiB, compared byte for byte" "$1" 65536 1 3
	blk_xfer "O_DIRECT write+read 1 MiB at 8 MiB, compared byte for byte" "$1" 1048576 1 8
	blk_xfer "O_DIRECT write+read 4 MiB (bs=1M) at 16 MiB, compared byte for byte" "$1" 1048576 4 16
}

# blk_xfer DESC BLOCKDEV BS COUNT SEEK: one subtest (skipped with $why set)
# that writes COUNT random blocks of BS at block SEEK of BLOCKDEV with
# O_DIRECT, reads them back with O_DIRECT and compares; each step bounded by
# $tmo.  Adds the bytes moved to BLK_XFER_TOTAL.  Scratch files go to $OUT.
BLK_XFER_TOTAL=0
blk_xfer() {
	local desc=$1 dev=$2 bs=$3 count=$4 seek=$5 pat=$OUT/pat.$3.$4 got=$OUT/got.$3.$4
	t_begin "$desc"
	if [ -n "$why" ]; then t_skip "$why"; return; fi
	head -c $((bs * count)) /dev/urandom >"$pat"
	if ! timeout "$tmo" dd if="$pat" of="$dev" bs="$bs" count="$count" seek="$seek" oflag=direct conv=notrunc status=none; then
		t_fail "dd write to $dev failed"
	elif ! timeout "$tmo" dd if="$dev" of="$got" bs="$bs" count="$count" skip="$seek" iflag=direct status=none; then
		t_fail "dd read from $dev failed"
	elif ! cmp "$pat" "$got"; then
		t_fail "read back differs: $(cmp "$pat" "$got" 2>&1 | head -1)"
	else
		BLK_XFER_TOTAL=$((BLK_XFER_TOTAL + 2 * bs * count))
	fi
	rm -f "$pat" "$got"
	t_end
}

# ----------------------------------------------------- LIO (SCSI targets)
# A memory-backed LIO backstore (target_core_rd, in target_core_mod) for the
# iSER and SRP targets, configured through configfs as targetcli would.
LIO=/sys/kernel/config/target

# lio_ramdisk_add NAME MIB: the backstore $LIO/core/rd_mcp_0/NAME; its path
# on stdout.
lio_ramdisk_add() {
	local b=$LIO/core/rd_mcp_0/$1
	mountpoint -q /sys/kernel/config || mount -t configfs none /sys/kernel/config || return 1
	modprobe target_core_mod || return 1
	mkdir -p "$b" && echo "rd_pages=$(($2 * 256))" >"$b/control" && echo 1 >"$b/enable" || return 1
	echo "$b"
}

# lio_ramdisk_del NAME: remove it (once no LUN links to it).
lio_ramdisk_del() {
	[ -d "$LIO/core/rd_mcp_0/$1" ] && rmdir "$LIO/core/rd_mcp_0/$1"
	[ -d "$LIO/core/rd_mcp_0" ] && rmdir "$LIO/core/rd_mcp_0" 2>/dev/null
	return 0
}

# scsi_disks: the sd block devices, one a line.
scsi_disks() { ls /sys/block 2>/dev/null | grep '^sd' | sort; }

# lio_disk_wait BEFORE: wait up to $tmo s for an sd disk that is not in
# BEFORE (a scsi_disks listing) to appear; sets blk to it, with a diag,
# and a t_fail (status 1) if none came or it is not LIO's.
lio_disk_wait() {
	local before=$1 d
	_new_sd() { comm -13 <(printf '%s\n' "$before") <(scsi_disks) | head -1; }
	_has_new_sd() { [ -n "$(_new_sd)" ] && [ -b "/dev/$(_new_sd)" ]; }
	if ! wait_for "$tmo" _has_new_sd; then
		t_fail "no sd disk appeared within ${tmo}s: $(dmesg | grep -iE 'scsi|sd ' | tail -3 | tr '\n' ' ')"
		return 1
	fi
	blk=/dev/$(_new_sd)
	d=/sys/block/${blk#/dev/}/device
	diag "$blk: $(cat "$d/vendor" "$d/model" | tr -s ' \n' ' ')$(($(cat "/sys/block/${blk#/dev/}/size") / 2048)) MiB"
	grep -q LIO "$d/vendor" || { t_fail "$blk is not LIO's disk: vendor '$(cat "$d/vendor")'"; return 1; }
}

# ulp_why MODULE... [-- COMMAND...]: why a kernel-consumer test cannot run
# here (a module not in this kernel, a command not installed), or nothing.
ulp_why() {
	local c
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		modinfo "$1" >/dev/null 2>&1 ||
			{ echo "module $1 not available in this kernel (the ULPs are in the plain flavor: scripts/kernel/)"; return; }
		shift
	done
	[ "${1:-}" = -- ] && shift
	for c in "$@"; do
		command -v "$c" >/dev/null || { echo "$c not installed (scripts/deps.sh installs it)"; return; }
	done
}

# ------------------------------------- file-system ULPs (NFS, SMB Direct)
FS_MB=16

# timed_dd WHAT DD-ARGS...: dd of $FS_MB MiB in 1 MiB blocks within $tmo,
# its rate in a diag; a t_fail (and status 1) if it fails.
timed_dd() {
	local what=$1 t0 ms
	shift
	t0=$(date +%s%N)
	if ! timeout "$tmo" dd "$@" bs=1M status=none 2>"$OUT/dd.err"; then
		t_fail "dd $what failed: $(tr '\n' ' ' <"$OUT/dd.err")"
		return 1
	fi
	ms=$((($(date +%s%N) - t0) / 1000000))
	diag "$what: $FS_MB MiB in $ms ms ($((FS_MB * 1000000 / (ms + 1))) KiB/s, TCG)"
}

# fs_checks NAME MNT EXP [SRV...]: three subtests (skipped with $why set)
# of a network file system mounted on MNT whose server exports EXP, read on
# the server through the command prefix SRV (none: a local server).  A
# $FS_MB MiB dd (fsync) is byte for byte the server's file; read back with
# O_DIRECT (no client cache) it matches; 64 small files (create, write,
# rename) have the same names and contents on the server.
fs_checks() {
	local name=$1 mnt=$2 exp=$3 want got n sn c sc
	shift 3
	t_begin "dd a $FS_MB MiB file through $name (conv=fsync): the server's copy is the same bytes"
	if [ -n "$why" ]; then
		t_skip "$why"
	else
		head -c $((FS_MB << 20)) /dev/urandom >"$OUT/pat"
		want=$(sha256sum <"$OUT/pat" | cut -c1-64)
		if timed_dd write if="$OUT/pat" of="$mnt/big" conv=fsync; then
			got=$("$@" sha256sum "$exp/big" | cut -c1-64)
			[ "$got" = "$want" ] || t_fail "server's $exp/big: sha256 $got, written $want"
		fi
		t_end
	fi

	t_begin "read it back with O_DIRECT (no client cache): the same bytes"
	if [ -n "$why" ]; then
		t_skip "$why"
	else
		if timed_dd read if="$mnt/big" of="$OUT/got" iflag=direct; then
			cmp -s "$OUT/pat" "$OUT/got" || t_fail "read back differs: $(cmp "$OUT/pat" "$OUT/got" 2>&1 | head -1)"
		fi
		rm -f "$OUT/pat" "$OUT/got"
		t_end
	fi

	t_begin "64 small files in a directory (create, write, rename, stat): the server has the same names and contents"
	if [ -n "$why" ]; then
		t_skip "$why"
	else
		if ! timeout "$tmo" bash -c '
			mkdir "$1/dir" || exit 1
			for i in $(seq 1 64); do
				printf "file %d of rroce %s\n" "$i" "$2" >"$1/dir/f$i.tmp" && mv "$1/dir/f$i.tmp" "$1/dir/f$i" || exit 1
			done
			sync' _ "$mnt" "$name"; then
			t_fail "creating the files through $name failed"
		fi
		n=$(find "$mnt/dir" -type f | wc -l)
		sn=$("$@" find "$exp/dir" -type f | wc -l)
		[ "$n" = 64 ] && [ "$sn" = 64 ] || t_fail "64 files wanted: client sees $n, server has $sn"
		c=$(cat "$mnt"/dir/f* | sha256sum) sc=$("$@" sh -c "cat $exp/dir/f*" | sha256sum)
		[ "$c" = "$sc" ] || t_fail "contents differ between client and server"
		"$@" grep -qx "file 37 of rroce $name" "$exp/dir/f37" || t_fail "server's f37: '$("$@" cat "$exp/dir/f37")'"
		t_end
	fi
}
