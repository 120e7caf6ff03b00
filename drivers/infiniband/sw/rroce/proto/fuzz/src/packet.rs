// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! Target `packet`: the receive path of `dp.rs` on arbitrary bytes.
//!
//! The input is used twice: as a RoCEv2 UDP payload (BTH .. ICRC) for
//! `hdr::parse_packet`, and as an IP datagram for `icrc::ip_layout`,
//! `parse_packet` of its UDP payload, `icrc::verify_ip` and `ud::grh_area`,
//! as `dp::rx_on` does.  Checked: the layout `parse_packet` reports lies
//! inside the input and adds up; every accepted packet rebuilds with
//! `build_headers` into a packet that parses to the same result; an ICRC
//! written with `write_icrc_ip` verifies; split in two anywhere after its
//! headers, the datagram gives the same layout, parse, payload and ICRC
//! verdict.

use rroce_proto::hdr::{build_headers, parse_of, parse_packet, Parsed};
use rroce_proto::icrc::{self, SoftCrc32, IPV6_HDR_LEN};
use rroce_proto::opcode::{self, ICRC_LEN};
use rroce_proto::rc::{is_rc_request, is_rc_response, InRequest, InResponse};
use rroce_proto::split::Split;
use rroce_proto::ud;

/// Check a successful parse of `pkt` and its round trip.
pub fn check_parsed(pkt: &[u8], p: &Parsed) {
    assert_eq!(p.icrc_off + ICRC_LEN, pkt.len());
    assert_eq!(p.payload_off, p.info.hdr_len());
    assert_eq!(p.payload_off + p.payload_len + p.pad, p.icrc_off);
    assert!(p.pad <= 3 && usize::from(p.bth.pad) == p.pad);
    assert_eq!(pkt.len() % 4, 0);
    assert_eq!(p.payload(pkt).len(), p.payload_len);
    assert_eq!(p.ext.present(), p.info.hdrs);
    assert_eq!(Some(p.info), opcode::lookup(p.bth.opcode));
    assert!(p.info.payload || p.payload_len == 0);
    assert_eq!(icrc::stored_icrc(pkt), Some(p.icrc));

    // Rebuild the headers from the parsed fields; with the original
    // payload, pad and ICRC the result must parse identically.
    let mut buf = vec![0u8; pkt.len()];
    let n = build_headers(&mut buf, &p.bth, &p.ext).expect("parsed headers must rebuild");
    assert_eq!(n, p.payload_off);
    buf[n..].copy_from_slice(&pkt[n..]);
    let q = parse_packet(&buf).expect("rebuilt packet must parse");
    assert_eq!(&q, p);
    // Only reserved bits may differ between the original and the rebuilt
    // BTH (byte 1 low nibble is TVer = 0, byte 4 bits 5:0 and byte 8 bits
    // 6:0 are reserved).
    for (i, (a, b)) in pkt[..12].iter().zip(&buf[..12]).enumerate() {
        let mask = match i {
            4 => 0xC0,
            8 => 0x80,
            _ => 0xFF,
        };
        assert_eq!(a & mask, b & mask, "BTH byte {i}");
    }

    // What the glue hands to the RC engines.
    let rq = InRequest::from_parsed(p, p.payload(pkt));
    let rs = InResponse::from_parsed(p);
    assert_eq!(rq.payload_len as usize, p.payload_len);
    assert_eq!(rs.payload_len as usize, p.payload_len);
    assert!(!(is_rc_request(p.bth.opcode) && is_rc_response(p.bth.opcode)));
    // UD acceptance with the packet's own Q_Key and another one.
    let qkey = p.ext.deth.map_or(0, |d| d.qkey);
    if let Ok(r) = ud::accept(&p.bth, &p.ext, qkey) {
        assert!(matches!(
            p.bth.opcode,
            opcode::UD_SEND_ONLY | opcode::UD_SEND_ONLY_WITH_IMMEDIATE
        ));
        assert_eq!(Some(r.src_qp), p.ext.deth.map(|d| d.src_qpn));
        assert!(r.src_qp <= 0x00FF_FFFF);
    }
    assert!(ud::accept(&p.bth, &p.ext, qkey ^ 1).is_err());
}

/// The receive path on the datagram `data` (layout `l`, ICRC `verified` or
/// not) in two pieces, split anywhere at or after its headers as
/// `icrc::headers_len` gives them: the same layout, parse, payload and ICRC
/// verdict as in one piece.
fn check_splits(data: &[u8], l: &icrc::IpLayout, verified: bool) {
    let whole = parse_packet(&data[l.roce_off..l.end]);
    let hdrs = match icrc::headers_len(data) {
        Ok(n) => n,
        Err(n) => {
            // More bytes needed than the datagram has: the packet is too
            // short for its headers, and the parser refuses it.
            assert!(n > data.len() || whole.is_err());
            return;
        }
    };
    if let Ok(p) = &whole {
        assert_eq!(hdrs, l.roce_off + p.payload_off);
    }
    for at in hdrs.min(data.len())..=data.len() {
        let s = Split {
            head: &data[..at],
            tail: &data[at..],
        };
        assert_eq!(icrc::ip_layout_of(s).as_ref(), Ok(l));
        assert_eq!(icrc::verify_of(SoftCrc32, s, l).is_ok(), verified);
        let roce = s.sub(l.roce_off, l.end).unwrap();
        let split = parse_of(roce);
        assert_eq!(split, whole);
        if let Ok(p) = split {
            // In one piece unless the split point falls inside it (the
            // receive path splits at the headers' end or not at all).
            let (start, end) = (
                l.roce_off + p.payload_off,
                l.roce_off + p.payload_off + p.payload_len,
            );
            match p.payload_of(roce) {
                Some(payload) => assert_eq!(payload, p.payload(&data[l.roce_off..l.end])),
                None => assert!(start < at && at < end, "{start} {at} {end}"),
            }
        }
    }
}

/// The harness.
pub fn run(data: &[u8]) {
    // As a UDP payload.
    if let Ok(p) = parse_packet(data) {
        check_parsed(data, &p);
    }
    // As an IP datagram (the path of `dp::rx`).
    let Ok(l) = icrc::ip_layout(data) else {
        return;
    };
    assert!(l.ip_hdr_len >= 20 && l.roce_off == l.ip_hdr_len + 8);
    assert!(l.roce_off < l.end && l.end <= data.len());
    let roce = &data[l.roce_off..l.end];
    let ipv6 = l.ip_hdr_len == IPV6_HDR_LEN && data[0] >> 4 == 6;
    assert!(data.get(if ipv6 { 24..40 } else { 16..20 }).is_some() || !ipv6);
    if let Ok(p) = parse_packet(roce) {
        check_parsed(roce, &p);
    }
    let verified = icrc::verify_ip(SoftCrc32, data).is_ok();
    let want = icrc::icrc_ip(SoftCrc32, data);
    assert_eq!(verified, want.ok() == icrc::stored_icrc(roce));
    check_splits(data, &l, verified);
    // Writing the ICRC makes it verify.
    let mut copy = data.to_vec();
    if icrc::write_icrc_ip(SoftCrc32, &mut copy).is_ok() {
        assert!(icrc::verify_ip(SoftCrc32, &copy).is_ok());
        assert_eq!(&copy[..l.end - 4], &data[..l.end - 4]);
    }
    let ip = data.get(..l.roce_off.saturating_sub(8)).unwrap_or(&[]);
    if let Some((grh, net)) = ud::grh_area(ip) {
        match net {
            ud::NETWORK_IPV4 => assert_eq!(&grh[20..], &ip[..20]),
            ud::NETWORK_IPV6 => assert_eq!(&grh[..], &ip[..40]),
            _ => panic!("unknown network type {net}"),
        }
    }
}
