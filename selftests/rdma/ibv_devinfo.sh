#!/usr/bin/env bash
# Userspace sees the devices through our libibverbs provider (and no other
# provider claims them): ibv_devices lists both, ibv_devinfo -v shows the
# port, MTU and GIDs.
. "$(dirname "$0")/../lib.sh"
test_init 6

why=$(provider_unavailable)
if [ -n "$why" ]; then
	for d in "ibv_devices" "ibv_devinfo $DEV0" "ibv_devinfo $DEV1" "provider isolation" "loaded provider"; do
		ktap_skip "$d" "$why"
	done
	test_done
fi

listed() { ibv_devices 2>/dev/null | awk 'NR > 2 { print $1 }' | grep -qx "$1"; }
field() { awk -v f="$2:" '$1 == f { $1 = ""; sub(/^ +/, ""); print; exit }' <<<"$1"; }

t_begin "ibv_devices lists $DEV0 and $DEV1 (from init_net)"
out=$(ibv_devices 2>&1)
diag "$(tr '\n' ' ' <<<"$out")"
listed "$DEV0" || t_fail "$DEV0 not listed"
listed "$DEV1" || t_fail "$DEV1 not listed"
guid=$(awk -v d="$DEV0" '$1 == d { print $2 }' <<<"$out")
expect_eq "$DEV0 node GUID" "$guid" "$(tr -d : <"$SYS_IB/$DEV0/node_guid")"
t_end

check_devinfo() {
	local dev=$1 ip=$2 out idx
	out=$(ibv_devinfo -v -d "$dev" 2>&1) || { t_fail "ibv_devinfo -v -d $dev failed: $(head -3 <<<"$out")"; return; }
	expect_eq "hca_id" "$(field "$out" hca_id)" "$dev"
	expect_eq "transport" "$(field "$out" transport)" "InfiniBand (0)"
	expect_eq "state" "$(field "$out" state)" "PORT_ACTIVE (4)"
	expect_eq "phys_state" "$(field "$out" phys_state)" "LINK_UP (5)"
	expect_eq "link_layer" "$(field "$out" link_layer)" "Ethernet"
	expect_eq "active_mtu" "$(field "$out" active_mtu)" "1024 (3)"
	expect_eq "max_mtu" "$(field "$out" max_mtu)" "4096 (5)"
	# What the WQE checks take (2^31, the IBA's limit); 1 GiB until 2026-12-07.
	if [ "$RROCE_TYPE" = rroce ]; then
		expect_eq "max_msg_sz" "$(field "$out" max_msg_sz)" "0x80000000"
	fi
	expect_eq "node_guid" "$(field "$out" node_guid)" "$(cat "$SYS_IB/$dev/node_guid")"
	idx=$(gid_index "$dev" "$(gid_v4 "$ip")")
	if [ -z "$idx" ]; then
		t_fail "no RoCE v2 GID for $ip in sysfs"
	else
		expect_eq "GID[$idx] line" "$(grep -E "GID\[ *$idx\]:" <<<"$out" | sed 's/^[[:space:]]*//; s/[[:space:]]\+/ /g')" \
			"$(printf 'GID[%3d]: ::ffff:%s, RoCE v2' "$idx" "$ip" | sed 's/[[:space:]]\+/ /g')"
	fi
	[ "$_t_err" = 0 ] || grep -E "state|mtu|GID" <<<"$out" | sed 's/^/#   /'
}

t_begin "ibv_devinfo -v -d $DEV0: PORT_ACTIVE, Ethernet, MTU, GID ::ffff:$IP0"
check_devinfo "$DEV0" "$IP0"
t_end

t_begin "ibv_devinfo -v -d $DEV1 (device of netns $NS1, from init_net)"
check_devinfo "$DEV1" "$IP1"
t_end

# A private mount namespace with only some libibverbs config files.
with_drivers() {
	local keep=$1 tmp
	shift
	tmp=$(mktemp -d)
	for f in /etc/libibverbs.d/*.driver; do
		case $keep in
		only) [ "${f##*/}" = "$DRIVER_FILE" ] && cp "$f" "$tmp/" ;;
		except) [ "${f##*/}" != "$DRIVER_FILE" ] && cp "$f" "$tmp/" ;;
		esac
	done
	unshare -m bash -c 'mount --bind "$1" /etc/libibverbs.d && shift && exec "$@"' _ "$tmp" "$@"
	rm -rf "$tmp"
}

t_begin "provider isolation: no other provider claims $DEV0, ours alone suffices"
if [ ! -f "/etc/libibverbs.d/$DRIVER_FILE" ]; then
	t_fail "/etc/libibverbs.d/$DRIVER_FILE missing (scripts/vm-init.sh sets it up)"
else
	others=$(with_drivers except ibv_devices 2>&1 | awk 'NR > 2 { print $1 }' | tr '\n' ' ')
	diag "without $DRIVER_FILE: [$others]"
	case " $others " in *" $DEV0 "*|*" $DEV1 "*) t_fail "another provider claims our device" ;; esac
	ours=$(with_drivers only ibv_devices 2>&1 | awk 'NR > 2 { print $1 }' | tr '\n' ' ')
	diag "with only $DRIVER_FILE: [$ours]"
	case " $ours " in *" $DEV0 "*) ;; *) t_fail "$DEV0 not found with only $DRIVER_FILE" ;; esac
	case " $ours " in *" $DEV1 "*) ;; *) t_fail "$DEV1 not found with only $DRIVER_FILE" ;; esac
fi
t_end

t_begin "libibverbs opens our provider library"
case $RROCE_TYPE in
rroce) lib=$RROCE_PROVIDER ;;
rxe) lib=librxe-rdmav34.so ;;
esac
loaded=$(LD_DEBUG=files ibv_devinfo -d "$DEV0" 2>&1 >/dev/null | grep -o "file=[^ ]*rdmav34.so" | sort -u | tr '\n' ' ')
diag "providers opened: $(tr " " "\n" <<<"$loaded" | grep -c .) incl. $(tr " " "\n" <<<"$loaded" | grep -F "${lib##*/}")"
case $loaded in *"${lib##*/}"*) ;; *) t_fail "${lib##*/} not opened" ;; esac
t_end

test_done
