// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! Unreliable Datagram (UD and the GSI QP1): the decisions of the UD data
//! path, independent of how packets and memory are handled.
//!
//! A UD send is one packet: BTH (`UD SEND Only [with Immediate]`, the
//! destination QP from the work request, the QP's next PSN, no AckReq) and
//! DETH (Q_Key, source QP); it completes as soon as it is sent.  A UD
//! receive is accepted if its Q_Key matches the QP's (the GSI QP only
//! takes the well-known QP1 Q_Key) and lands in the next receive WQE after
//! the 40-byte GRH area, which for RoCEv2 holds the IP header the packet
//! came with (IPv4: in the last 20 bytes).

use super::hdr::{Bth, Deth, Ext, DEFAULT_PKEY};
use super::opcode::{UD_SEND_ONLY, UD_SEND_ONLY_WITH_IMMEDIATE};
use super::rc::{imm_from_wqe, imm_to_cqe};
use super::wqe::{SendOpcode, SendWqe, WcStatus, SEND_SOLICITED};

/// The Q_Key of the GSI QP (QP1).
pub const GSI_QKEY: u32 = 0x8001_0000;
/// Bytes of the GRH area at the start of every UD receive buffer.
pub const GRH_BYTES: usize = 40;
/// `enum rdma_network_type` of a RoCEv2 packet over IPv4.
pub const NETWORK_IPV4: u8 = 2;
/// `enum rdma_network_type` of a RoCEv2 packet over IPv6.
pub const NETWORK_IPV6: u8 = 3;

/// The `sl` of a UD receive completion of a RoCEv2 packet over IP version
/// `net` ([`NETWORK_IPV4`] or [`NETWORK_IPV6`]), as RoCE HCAs report it
/// (the CQE's L3 header type of mlx5): bit 3 = the frame had a UDP
/// header (RoCEv2), bits 2..0 = the L3 header, 1 IPv6 or 2 IPv4.  RoCE has
/// no service level on the wire, and UCX's ud_verbs tells from this field
/// whether the destination address in the GRH area is an IPv4 address
/// (its last 4 bytes) or a GID (its last 16): with `sl` 0 it took the bytes
/// of the IPv4 header for a GID and dropped every datagram.
pub fn roce_sl(net: u8) -> u8 {
    const UDP: u8 = 0x8;
    if net == NETWORK_IPV4 {
        UDP | 2
    } else {
        UDP | 1
    }
}

/// Headers of a UD send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdPacket {
    /// The BTH.
    pub bth: Bth,
    /// DETH and ImmDt.
    pub ext: Ext,
}

/// The packet of UD send WQE `w` of `len` bytes, from QP `src_qpn` whose
/// Q_Key is `qp_qkey`, at PSN `psn`, for a path MTU of `mtu` bytes; or
/// the status it completes with.
pub fn send_packet(
    w: &SendWqe,
    len: u32,
    src_qpn: u32,
    qp_qkey: u32,
    psn: u32,
    mtu: u32,
) -> Result<UdPacket, WcStatus> {
    let opcode = match w.opcode {
        SendOpcode::Send => UD_SEND_ONLY,
        SendOpcode::SendWithImm => UD_SEND_ONLY_WITH_IMMEDIATE,
        _ => return Err(WcStatus::LocQpOpErr),
    };
    if len > mtu {
        return Err(WcStatus::LocLenErr);
    }
    // A Q_Key with the high bit set means "use the QP's" (IBA 10.2.5).
    let qkey = if w.remote_qkey & 0x8000_0000 != 0 {
        qp_qkey
    } else {
        w.remote_qkey
    };
    let bth = Bth {
        opcode,
        se: w.flags & SEND_SOLICITED != 0,
        pkey: DEFAULT_PKEY,
        dest_qpn: w.remote_qpn & 0x00FF_FFFF,
        psn: psn & 0x00FF_FFFF,
        pad: ((4 - (len % 4)) % 4) as u8,
        ..Bth::default()
    };
    let ext = Ext {
        deth: Some(Deth {
            qkey,
            src_qpn: src_qpn & 0x00FF_FFFF,
        }),
        immdt: (w.opcode == SendOpcode::SendWithImm).then(|| imm_from_wqe(w.imm_or_inv)),
        ..Ext::default()
    };
    Ok(UdPacket { bth, ext })
}

/// A UD request accepted by a QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdRecv {
    /// Source QP (the CQE's `src_qp`).
    pub src_qp: u32,
    /// Immediate data in CQE byte order, if any.
    pub imm: Option<u32>,
    /// Solicited event requested.
    pub solicited: bool,
}

/// Why a UD packet was not accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UdDrop {
    /// Not a UD SEND Only.
    Opcode,
    /// No DETH.
    NoDeth,
    /// The Q_Key does not match the QP's.
    Qkey,
}

/// Whether a QP with Q_Key `qp_qkey` takes the UD packet `bth`/`ext`.
pub fn accept(bth: &Bth, ext: &Ext, qp_qkey: u32) -> Result<UdRecv, UdDrop> {
    if bth.opcode != UD_SEND_ONLY && bth.opcode != UD_SEND_ONLY_WITH_IMMEDIATE {
        return Err(UdDrop::Opcode);
    }
    let deth = ext.deth.ok_or(UdDrop::NoDeth)?;
    if deth.qkey != qp_qkey {
        return Err(UdDrop::Qkey);
    }
    Ok(UdRecv {
        src_qp: deth.src_qpn,
        imm: ext.immdt.map(imm_to_cqe),
        solicited: bth.se,
    })
}

/// The GRH area of a receive buffer for a packet that arrived with IP
/// header `ip` (20 bytes or more for IPv4, 40 for IPv6), and the network
/// type; `None` if `ip` is neither.
pub fn grh_area(ip: &[u8]) -> Option<([u8; GRH_BYTES], u8)> {
    let mut g = [0u8; GRH_BYTES];
    match ip.first()? >> 4 {
        4 => {
            g.get_mut(20..)?.copy_from_slice(ip.get(..20)?);
            Some((g, NETWORK_IPV4))
        }
        6 => {
            g.copy_from_slice(ip.get(..GRH_BYTES)?);
            Some((g, NETWORK_IPV6))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::hdr::{build_headers, packet_len, parse_packet};
    use super::*;

    fn wqe(op: SendOpcode) -> SendWqe {
        let mut w = SendWqe::new(9, op);
        w.remote_qpn = 0x12_3456;
        w.remote_qkey = 0x1111_2222;
        w.imm_or_inv = 0x0403_0201;
        w.flags = SEND_SOLICITED;
        w
    }

    #[test]
    fn send_then_accept() {
        let w = wqe(SendOpcode::SendWithImm);
        let p = send_packet(&w, 5, 77, 0x5555, 0x1FF_FFFF, 1024).unwrap();
        assert_eq!(p.bth.opcode, UD_SEND_ONLY_WITH_IMMEDIATE);
        assert_eq!(
            (p.bth.dest_qpn, p.bth.psn, p.bth.pad),
            (0x12_3456, 0xFF_FFFF, 3)
        );
        assert!(!p.bth.ack_req && p.bth.se);
        assert_eq!(
            p.ext.deth,
            Some(Deth {
                qkey: 0x1111_2222,
                src_qpn: 77
            })
        );
        // Round trip through the wire format.
        let mut buf = [0u8; 128];
        let n = build_headers(&mut buf, &p.bth, &p.ext).unwrap();
        let total = packet_len(p.bth.opcode, 5).unwrap();
        assert!(n + 5 + 3 + 4 == total);
        let parsed = parse_packet(&buf[..total]).unwrap();
        let r = accept(&parsed.bth, &parsed.ext, 0x1111_2222).unwrap();
        assert_eq!(
            r,
            UdRecv {
                src_qp: 77,
                imm: Some(0x0403_0201),
                solicited: true
            }
        );
        assert_eq!(
            accept(&parsed.bth, &parsed.ext, 0x1111_2223),
            Err(UdDrop::Qkey)
        );
    }

    #[test]
    fn qp_qkey_and_errors() {
        let mut w = wqe(SendOpcode::Send);
        w.remote_qkey = 0x8000_0001;
        let p = send_packet(&w, 1024, 1, GSI_QKEY, 0, 1024).unwrap();
        assert_eq!(p.ext.deth.unwrap().qkey, GSI_QKEY);
        assert_eq!(p.bth.opcode, UD_SEND_ONLY);
        assert!(p.ext.immdt.is_none());
        assert_eq!(
            send_packet(&w, 1025, 1, 0, 0, 1024),
            Err(WcStatus::LocLenErr)
        );
        assert_eq!(
            send_packet(&wqe(SendOpcode::RdmaWrite), 1, 1, 0, 0, 1024),
            Err(WcStatus::LocQpOpErr)
        );
        let rc = Bth {
            opcode: 0x04,
            ..Bth::default()
        };
        assert_eq!(accept(&rc, &Ext::default(), 0), Err(UdDrop::Opcode));
        let ud = Bth {
            opcode: UD_SEND_ONLY,
            ..Bth::default()
        };
        assert_eq!(accept(&ud, &Ext::default(), 0), Err(UdDrop::NoDeth));
    }

    #[test]
    fn grh() {
        let mut v4 = [0u8; 24];
        v4[0] = 0x45;
        v4[19] = 7;
        let (g, t) = grh_area(&v4).unwrap();
        assert_eq!(t, NETWORK_IPV4);
        assert_eq!(roce_sl(t), 0xa);
        assert_eq!(roce_sl(NETWORK_IPV6), 0x9);
        assert_eq!(&g[..20], &[0u8; 20]);
        assert_eq!(&g[20..], &v4[..20]);
        let mut v6 = [0u8; 40];
        v6[0] = 0x60;
        v6[39] = 9;
        assert_eq!(grh_area(&v6), Some((v6, NETWORK_IPV6)));
        assert_eq!(grh_area(&v6[..39]), None);
        assert_eq!(grh_area(&[0x50; 40]), None);
        assert_eq!(grh_area(&[]), None);
    }
}
