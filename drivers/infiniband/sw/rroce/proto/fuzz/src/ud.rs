// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! Target `ud`: the UD send and accept rules.
//!
//! Input: a UD send WQE and QP parameters for `ud::send_packet`, whose
//! packet must build, parse back and be accepted by a QP with the same
//! Q_Key (and only by it); then arbitrary bytes as a received packet for
//! `ud::accept`, and as an IP header for `ud::grh_area`.

use crate::{build_packet, Reader};
use rroce_proto::hdr::{packet_len, parse_packet};
use rroce_proto::opcode::{UD_SEND_ONLY, UD_SEND_ONLY_WITH_IMMEDIATE};
use rroce_proto::rc::{imm_from_wqe, imm_to_cqe};
use rroce_proto::ud;
use rroce_proto::wqe::{SendOpcode, SendWqe, WcStatus, SEND_SOLICITED};

/// The harness.
pub fn run(data: &[u8]) {
    let mut r = Reader::new(data);
    let op = SendOpcode::from_u8(r.u8() % 12);
    let len = match r.u8() % 4 {
        0 => u32::from(r.u8()),
        1 => u32::from(r.u16()),
        _ => r.u32(),
    };
    let src_qpn = r.u32();
    let qp_qkey = r.u32();
    let psn = r.u32();
    let mtu = match r.u8() % 3 {
        0 => 256 << (r.u8() % 5),
        1 => u32::from(r.u16()),
        _ => r.u32(),
    };
    if let Some(op) = op {
        let mut w = SendWqe::new(r.u64(), op);
        w.flags = r.u8();
        w.imm_or_inv = r.u32();
        w.remote_qpn = r.u32();
        w.remote_qkey = r.u32();
        send_then_accept(&w, len, src_qpn, qp_qkey, psn, mtu);
    }

    // Arbitrary received bytes.
    let qkey = r.u32();
    let pkt = r.chunk(4096);
    if let Ok(p) = parse_packet(pkt) {
        if let Ok(a) = ud::accept(&p.bth, &p.ext, qkey) {
            assert!(matches!(
                p.bth.opcode,
                UD_SEND_ONLY | UD_SEND_ONLY_WITH_IMMEDIATE
            ));
            let deth = p.ext.deth.expect("accepted without DETH");
            assert_eq!(deth.qkey, qkey);
            assert_eq!(a.src_qp, deth.src_qpn);
            assert_eq!(a.imm.is_some(), p.ext.immdt.is_some());
        }
    }
    let ip = r.rest();
    if let Some((grh, net)) = ud::grh_area(ip) {
        match ip[0] >> 4 {
            4 => {
                assert_eq!(net, ud::NETWORK_IPV4);
                assert!(grh[..20].iter().all(|&b| b == 0));
                assert_eq!(&grh[20..], &ip[..20]);
            }
            6 => {
                assert_eq!(net, ud::NETWORK_IPV6);
                assert_eq!(&grh[..], &ip[..40]);
            }
            v => panic!("grh_area took IP version {v}"),
        }
    } else if let Some(&b) = ip.first() {
        assert!(b >> 4 != 4 || ip.len() < 20);
        assert!(b >> 4 != 6 || ip.len() < 40);
    }
}

fn send_then_accept(w: &SendWqe, len: u32, src_qpn: u32, qp_qkey: u32, psn: u32, mtu: u32) {
    let p = match ud::send_packet(w, len, src_qpn, qp_qkey, psn, mtu) {
        Ok(p) => p,
        Err(WcStatus::LocQpOpErr) => {
            assert!(!matches!(
                w.opcode,
                SendOpcode::Send | SendOpcode::SendWithImm
            ));
            return;
        }
        Err(WcStatus::LocLenErr) => {
            assert!(len > mtu);
            return;
        }
        Err(e) => panic!("unexpected send_packet error {e:?}"),
    };
    assert!(len <= mtu);
    let qkey = if w.remote_qkey & 0x8000_0000 != 0 {
        qp_qkey
    } else {
        w.remote_qkey
    };
    assert_eq!(p.ext.deth.map(|d| d.qkey), Some(qkey));
    assert_eq!(p.bth.se, w.flags & SEND_SOLICITED != 0);
    // Build and parse back (payloads up to 64 KiB; larger MTUs are not
    // real but must not break header building).
    let Ok(n) = usize::try_from(len) else { return };
    assert!(packet_len(p.bth.opcode, n).is_some());
    if n > 1 << 16 {
        return;
    }
    let pkt = build_packet(&p.bth, &p.ext, n).expect("UD headers must build");
    assert_eq!(Some(pkt.len()), packet_len(p.bth.opcode, n));
    let q = parse_packet(&pkt).expect("UD packet must parse");
    assert_eq!(q.bth, p.bth);
    assert_eq!(q.ext, p.ext);
    assert_eq!(q.payload_len, n);
    let a = ud::accept(&q.bth, &q.ext, qkey).expect("the sender's Q_Key must be accepted");
    assert_eq!(a.src_qp, src_qpn & 0x00FF_FFFF);
    assert_eq!(a.solicited, p.bth.se);
    if w.opcode == SendOpcode::SendWithImm {
        assert_eq!(a.imm, Some(w.imm_or_inv));
        assert_eq!(imm_to_cqe(imm_from_wqe(w.imm_or_inv)), w.imm_or_inv);
    } else {
        assert_eq!(a.imm, None);
    }
    assert_eq!(
        ud::accept(&q.bth, &q.ext, qkey.wrapping_add(1)),
        Err(ud::UdDrop::Qkey)
    );
}
