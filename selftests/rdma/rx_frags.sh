#!/usr/bin/env bash
# Packets that arrive in page fragments (py/rx_frags.py): a tap device with
# IFF_NAPI_FRAGS (each iovec after the first a page fragment of the skb, as
# virtio-net delivers what follows the Ethernet header) carries an rroce
# device whose RC QP's peer is the script itself.  WRITE and SEND requests
# written as one fragment after the Ethernet header, after IP+UDP or after
# the RoCE headers are read in place; a fragment starting inside the
# payload and two fragments are copied first (`rx_linearized`).  Bytes
# placed, ACKs (PSN, ICRC) read back from the tap, exact counter deltas;
# pad bytes, an empty WRITE, a 3-packet WRITE; a wrong ICRC in the fragment
# and a packet short of its RETH are counted and change nothing.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
. "$(dirname "$0")/../lib.sh"
test_init 2

why=
[ "$RROCE_TYPE" = rxe ] && why="rroce's rx_linearized counter"
[ -n "$why" ] || why=$(provider_unavailable)
[ -c /dev/net/tun ] || why=${why:-no /dev/net/tun}
PY_CHECKS_TMO=$((120 * ${RROCE_TIMEOUT_SCALE:-1}))
if [ -n "$why" ]; then
	ktap_skip "rx in page fragments" "$why"
else
	py_checks "rx in page fragments: read in place, or copied and counted; bytes, ACKs, counters" \
		rx_frags.py --dev rroce9 --ifname rrtap0
fi

test_done
