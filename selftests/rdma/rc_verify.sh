#!/usr/bin/env bash
# RC data integrity, byte for byte, with py/rc_xfer.py: QP pairs between
# $DEV0 (init_net, requester) and $DEV1 (netns peer, responder), connected
# directly in one process; every packet crosses the veth rr0 <-> rr1.  Every
# message has fresh random content and is checked where it lands; every
# completion is checked (status, opcode, order, byte_len, immediate) and
# none may be lost or extra.
#   1    the port hw_counters exist with the expected names
#   2-4  SEND, RDMA WRITE, RDMA READ: 16 MiB each in 1 MiB messages, PSNs
#        starting at 0xffff00 (the 24-bit PSN wraps within the transfer);
#        the packet counters must account for every packet, and no error
#        completion, retry exhaustion or ICRC error may be counted
#   5    SEND_WITH_IMM and RDMA_WRITE_WITH_IMM: immediate data and lengths
#   6    64 QP pairs at once, 4 x 64 KiB per QP and operation
# The same under packet loss, reordering and duplication: rc_netem_*.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
. "$(dirname "$0")/../lib.sh"
test_init 7
rc_xfer_setup

# 1
t_begin "hw_counters of $DEV0 and $DEV1 exist with the expected names"
[ -z "$HWC_WHY" ] || t_fail "$HWC_WHY"
t_end

# 2-4
for op in send write read; do
	t_begin "$op 16 MiB in 1 MiB messages $DEV0 -> $DEV1, PSN wrap, data verified"
	if [ -n "$RC_WHY" ]; then
		t_skip "$RC_WHY"
		continue
	fi
	if rc_xfer 400 --ops "$op" --total 16M --msg 1M --start-psn 0xffff00 && [ -z "$HWC_WHY" ]; then
		rc_no_errors
		# every packet of the 16 MiB crossed: at least 16 MiB / path MTU
		n=$(((16 << 20) / ${XFER_MTU:-4096}))
		if [ "$op" = read ]; then
			at_least "$DEV1 tx_packets delta (READ responses)" "${XD1[tx_packets]}" "$n"
			at_least "$DEV0 rx_packets delta (READ responses)" "${XD0[rx_packets]}" "$n"
		else
			at_least "$DEV0 tx_packets delta" "${XD0[tx_packets]}" "$n"
			at_least "$DEV1 rx_packets delta" "${XD1[rx_packets]}" "$n"
		fi
	fi
	t_end
done

# 5
t_begin "SEND_WITH_IMM and RDMA_WRITE_WITH_IMM 4 MiB in 64 KiB messages: immediate data, lengths"
if [ -n "$RC_WHY" ]; then
	t_skip "$RC_WHY"
else
	rc_xfer 400 --ops send_imm,write_imm --total 4M --msg 64K && [ -z "$HWC_WHY" ] && rc_no_errors
	t_end
fi

# 6
t_begin "64 QP pairs at once: send, write, read 4 x 64 KiB per QP, no completion lost"
if [ -n "$RC_WHY" ]; then
	t_skip "$RC_WHY"
else
	rc_xfer 600 --qps 64 --ops send,write,read --total 256K --msg 64K && [ -z "$HWC_WHY" ] && rc_no_errors
	t_end
fi

test_done
